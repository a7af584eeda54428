#!/usr/bin/env bash
# Fault-injection suite for the operator process (issue 13), run by hand (not in CI: ~15 min).
# A private local control plane (tests/cluster) with the apiserver audit log on, kwok nodes, and
# TWO nodewright-operator processes with LEADER_ELECTION=true, each with its own identity and
# User-Agent (NODEWRIGHT_USER_AGENT) so the audit log tells their writes apart. Scenarios:
#
#   failover  SIGSTOP the leader mid-rollout; the standby must take the Lease; SIGCONT the old
#             leader; the audit log must show no write from it after the new leader acquired.
#   killloop  FAULTS_KILLS (20) SIGKILLs of the current leader at random moments of a rollout of
#             3 nodes x 3 packages with reboot interrupts and interruptionBudget 1 (each killed
#             process is restarted at once as a new candidate): no duplicate executor Job
#             creation, no interrupt twice on a node, never more than 1 node cordoned, all complete.
#   apiserver stop kube-apiserver for 60 s mid-rollout: operators keep running, report not-ready,
#             write nothing wrong, the rollout completes after recovery.
#   etcd      the same with etcd stopped for 60 s.
#
# Usage: tests/faults/run.sh [failover] [killloop] [apiserver] [etcd]     (default: all four)
# Env:   NODEWRIGHT_RUN (default /tmp/nodewright-faults), ETCD_PORT, ETCD_PEER_PORT,
#        APISERVER_PORT, KCM_PORT, KWOK_PORT (tests/cluster/lib.sh), FAULTS_PROBE_PORT (first of two
#        probe ports, default 18191), FAULTS_KILLS (20), FAULTS_OUTAGE (60 seconds),
#        FAULTS_POD_SECONDS (20: how long each executor pod of the kill loop runs),
#        NODEWRIGHT_FAULTS_KEEP=1 to leave everything running.
# Output: one "RESULT <scenario> key=value ..." line per scenario on stdout, details on stderr;
#         exit 1 if any assertion failed.
set -euo pipefail
FAULTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$FAULTS_DIR/../.." && pwd)
: "${NODEWRIGHT_RUN:=/tmp/nodewright-faults}"
: "${ETCD_PORT:=25790}" "${ETCD_PEER_PORT:=25800}" "${APISERVER_PORT:=8443}" "${KCM_PORT:=12257}" "${KWOK_PORT:=12247}"
: "${FAULTS_PROBE_PORT:=18191}" "${FAULTS_KILLS:=20}" "${FAULTS_OUTAGE:=60}" "${FAULTS_POD_SECONDS:=20}"
export NODEWRIGHT_RUN ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT KWOK_PORT
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"
export KUBECONFIG=$KUBECONFIG_PATH
NS=nodewright
LEASE=3c22c1ae.nvidia.com
AUDIT=$LOGS/audit.log
failed=0
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(failover killloop apiserver etcd)

log() { printf '[faults %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; failed=1; }
now_ts() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }   # the audit log's timestamp format
now_ms() { date +%s%3N; }

# --- operators: two slots (a, b); every (re)start gets a new generation, identity and User-Agent ---
declare -A PID GEN
op_env() { # slot generation
  cat <<EOF
KUBECONFIG=$KUBECONFIG
NAMESPACE=$NS
LEADER_ELECTION=true
ENABLE_WEBHOOKS=false
METRICS_PORT=0
PROBE_PORT=127.0.0.1:$(probe_port "$1")
LOG_ENCODER=console
LOG_LEVEL=info
POD_NAME=faults-$1-$2
NODEWRIGHT_USER_AGENT=nodewright-faults-$1-$2
NODEWRIGHT_TRACE=$RUN/traces/op-$1-$(printf %03d "$2").jsonl
EOF
}
probe_port() { if [ "$1" = a ]; then echo "$FAULTS_PROBE_PORT"; else echo $((FAULTS_PROBE_PORT + 1)); fi; }
start_op() { # slot
  local slot=$1 gen=$(( ${GEN[$1]:-0} + 1 ))
  GEN[$slot]=$gen
  op_env "$slot" "$gen" > "$RUN/op-$slot.env"
  (
    set -a; . "$RUN/op-$slot.env"; set +a
    echo "=== start gen $gen $(date -u +%FT%TZ)" >> "$LOGS/op-$slot.log"
    setsid "$OPERATOR_BIN" >> "$LOGS/op-$slot.log" 2>&1 < /dev/null &
    echo $! > "$PIDS/op-$slot.pid"
  )
  PID[$slot]=$(cat "$PIDS/op-$slot.pid")
}
alive() { [ -d "/proc/${PID[$1]}" ] && ! grep -q '^State:.*Z' "/proc/${PID[$1]}/status" 2>/dev/null; }
stop_ops() { local s; for s in a b; do [ -n "${PID[$s]:-}" ] && kill -TERM "${PID[$s]}" 2>/dev/null || true; done; sleep 2
             for s in a b; do [ -n "${PID[$s]:-}" ] && kill -KILL "${PID[$s]}" 2>/dev/null || true; done; }
ready_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$(probe_port "$1")/readyz" || true; }
holder() { kc -n "$NS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
slot_of() { # identity -> slot (a|b) when it is the current generation of a live slot
  local id=$1 s
  for s in a b; do
    [[ "$id" == "faults-$s-${GEN[$s]}_"* ]] && alive "$s" && { echo "$s"; return 0; }
  done
  return 1
}
wait_leader() { # timeout -> prints the leading slot
  local deadline=$(( $(date +%s) + $1 )) s
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if s=$(slot_of "$(holder)"); then echo "$s"; return 0; fi
    sleep 0.2
  done
  return 1
}

# --- rollout objects ---------------------------------------------------------------------------
nodewright() { # name
  kc apply -f - >/dev/null <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata: {name: $1}
spec:
  nodeSelectors: {matchLabels: {faults.nodewright.test/pool: $1}}
  interruptionBudget: {count: 1}
  packages:
    alpha: {version: 1.0.0, image: example.invalid/faults/alpha, interrupt: {type: reboot}}
    beta:  {version: 1.0.0, image: example.invalid/faults/beta,  interrupt: {type: reboot}}
    gamma: {version: 1.0.0, image: example.invalid/faults/gamma, interrupt: {type: reboot}}
EOF
}
nw_status() { kc get nodewright "$1" -o jsonpath='{.status.status}' 2>/dev/null || true; }
jobs_of() { kc -n "$NS" get jobs -l "nodewright.nvidia.com/name=$1" -o name 2>/dev/null | wc -l; }
wait_jobs() { # nw n timeout
  local deadline=$(( $(date +%s) + $3 ))
  until [ "$(jobs_of "$1")" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
wait_complete() { # nw timeout
  local deadline=$(( $(date +%s) + $2 ))
  until [ "$(nw_status "$1")" = complete ]; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 1
  done
}
# Samples the number of cordoned nodes of pool $1 every 0.5 s into $RUN/cordon-$1.txt.
start_sampler() {
  ( while :; do
      kc get nodes -l "faults.nodewright.test/pool=$1" -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' 2>/dev/null \
        | grep -c true || true
      sleep 0.5
    done > "$RUN/cordon-$1.txt" ) &
  SAMPLER=$!
}
stop_sampler() { kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true; }
# A slow kubelet: every executor pod of NodeWright $1 runs $2 (kwok's e2e.kwok/run-duration,
# re-evaluated by kwok when the annotation is added) instead of 1 s, so that the rollout spans
# many leadership terms.
start_slow_pods() {
  ( while :; do
      names=$(kc -n "$NS" get pods -l "nodewright.nvidia.com/name=$1" -o json 2>/dev/null         | jq -r '.items[] | select(.metadata.annotations["e2e.kwok/run-duration"] == null) | .metadata.name')
      # shellcheck disable=SC2086  # one name per word
      [ -z "$names" ] || kc -n "$NS" annotate pods $names "e2e.kwok/run-duration=$2" >/dev/null 2>&1 || true
      sleep 0.2
    done ) &
  SLOWER=$!
}
stop_slow_pods() { kill "$SLOWER" 2>/dev/null || true; wait "$SLOWER" 2>/dev/null || true; }
max_cordoned() { sort -n "$RUN/cordon-$1.txt" | tail -1; }

# Executor Job creations of NodeWright $1 in the audit log, one line per creation that succeeded:
# "<node> <package> <stage> <userAgent> <time> <interrupt label>".
job_creations() {
  jq -r --arg nw "$1" 'select(.objectRef.resource == "jobs" and .verb == "create"
      and .stage == "ResponseComplete" and .responseStatus.code == 201
      and .requestObject.metadata.labels["nodewright.nvidia.com/name"] == $nw)
    | [.requestObject.metadata.labels["nodewright.nvidia.com/node"],
       .requestObject.metadata.labels["nodewright.nvidia.com/package"],
       .requestObject.metadata.labels["nodewright.nvidia.com/stage"],
       .userAgent, .requestReceivedTimestamp,
       (.requestObject.metadata.labels["nodewright.nvidia.com/interrupt"] // "-")] | join(" ")' "$AUDIT"
}
check_jobs() { # nw scenario -> sets JOBS DUPS INTERRUPT_DUPS
  local all; all=$(job_creations "$1")
  JOBS=$(grep -c . <<< "$all" || true)
  DUPS=$(awk '{print $1, $2, $3}' <<< "$all" | sort | uniq -d | wc -l)
  # One interrupt per node: the three packages' reboots are merged into one interrupt Job.
  INTERRUPT_DUPS=$(awk '$6 == "True" {print $1}' <<< "$all" | sort | uniq -d | wc -l)
  [ "$DUPS" = 0 ] || { fail "$2: duplicate Job creations:"; awk '{print $1, $2, $3}' <<< "$all" | sort | uniq -d >&2; }
  [ "$INTERRUPT_DUPS" = 0 ] || fail "$2: an interrupt ran twice on a node"
  [ "$JOBS" -gt 0 ] || fail "$2: no Job creation in the audit log"
}
check_done() { # nw scenario
  local n
  n=$(kc get nodes -l "faults.nodewright.test/pool=$1" -o jsonpath='{range .items[*]}{.spec.unschedulable}{"\n"}{end}' | grep -c true || true)
  [ "$n" = 0 ] || fail "$2: $n nodes still cordoned at the end"
  MAXC=$(max_cordoned "$1")
  [ "${MAXC:-0}" -le 1 ] || fail "$2: $MAXC nodes cordoned at once (budget 1)"
}
# Writes (any verb but get/list/watch) by User-Agent $1 received after time $2.
writes_after() {
  jq -r --arg ua "$1" --arg t "$2" 'select(.userAgent == $ua and .stage == "ResponseComplete"
      and (.verb | IN("get", "list", "watch") | not) and .requestReceivedTimestamp > $t)
    | "\(.requestReceivedTimestamp) \(.verb) \(.objectRef.resource)/\(.objectRef.name // "") \(.responseStatus.code)"' "$AUDIT"
}
# Time the lease was first written by User-Agent $1 naming identity prefix $2, after time $3.
acquired_at() {
  jq -r --arg ua "$1" --arg id "$2" --arg t "$3" 'select(.userAgent == $ua and .stage == "ResponseComplete"
      and .objectRef.resource == "leases" and .objectRef.name == "'"$LEASE"'"
      and (.verb == "update" or .verb == "create") and (.responseStatus.code // 0) < 300
      and ((.requestObject.spec.holderIdentity // "") | startswith($id))
      and .requestReceivedTimestamp > $t) | .requestReceivedTimestamp' "$AUDIT" | sort | head -1
}
iso_ms() { date -d "$1" +%s%3N; }
# Time of the last successful Lease write by User-Agent $1 before time $2.
last_lease_write_before() {
  jq -r --arg ua "$1" --arg t "$2" 'select(.userAgent == $ua and .stage == "ResponseComplete"
      and .objectRef.resource == "leases" and .objectRef.name == "'"$LEASE"'"
      and (.verb == "update" or .verb == "create") and (.responseStatus.code // 0) < 300
      and .requestReceivedTimestamp < $t) | .requestReceivedTimestamp' "$AUDIT" | sort | tail -1
}

# --- setup -------------------------------------------------------------------------------------
cleanup() {
  local rc=$?
  set +e
  stop_sampler 2>/dev/null; stop_slow_pods 2>/dev/null
  if [ "${NODEWRIGHT_FAULTS_KEEP:-0}" = 1 ]; then
    log "leaving cluster and operators running (KUBECONFIG=$KUBECONFIG)"
  else
    stop_ops
    "$ROOT/tests/cluster/down.sh" >/dev/null 2>&1
  fi
  exit "$rc"
}
trap cleanup EXIT
SAMPLER= SLOWER=

cd "$ROOT"
"$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true
rm -rf "$RUN/etcd" "$AUDIT"
mkdir -p "$RUN" "$LOGS" "$PIDS"; rm -rf "$RUN/traces"; mkdir -p "$RUN/traces"
cat > "$RUN/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Request
  resources:
  - group: batch
    resources: [jobs]
  - group: ""
    resources: [nodes]
- level: Request
  namespaces: [$NS]
  resources:
  - group: coordination.k8s.io
    resources: [leases]
- level: None
  namespaces: [kube-node-lease]
- level: Metadata
EOF
NODEWRIGHT_AUDIT_POLICY=$RUN/audit-policy.yaml "$ROOT/tests/cluster/up.sh" > /dev/null
kc get namespace "$NS" >/dev/null 2>&1 || kc create namespace "$NS" >/dev/null
kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
# Right after the apply a CRD may have no status yet, which kubectl wait reports as an error
# instead of waiting: retry (lib.sh wait_for) for up to 60 s.
wait_for 60 "CRDs Established" kc wait --for=condition=Established --timeout=5s crd/nodewrights.nodewright.nvidia.com || exit 1
cargo build -q -p nodewright-shell --bin nodewright-operator
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
OPERATOR_BIN=$target_dir/debug/nodewright-operator
for pool in failover killloop apiserver etcd; do
  NODEWRIGHT_NODE_LABELS="faults.nodewright.test/pool=$pool" "$ROOT/tests/cluster/nodes.sh" 3 "f-$pool" > /dev/null
done
start_op a
sleep 1
start_op b
L=$(wait_leader 60) || { fail "no leader after 60 s"; exit 1; }
log "operators a (pid ${PID[a]}) and b (pid ${PID[b]}) running; leader: $L"

# --- scenarios ---------------------------------------------------------------------------------
failover() {
  local l s ua_l id_s t_stop t_stop_ms t_acq took writes
  l=$(wait_leader 60); s=$([ "$l" = a ] && echo b || echo a)
  ua_l="nodewright-faults-$l-${GEN[$l]}"; id_s="faults-$s-${GEN[$s]}_"
  nodewright failover
  wait_jobs failover 2 120 || { fail "failover: rollout did not start"; return; }
  start_sampler failover
  t_stop=$(now_ts); t_stop_ms=$(now_ms)
  kill -STOP "${PID[$l]}"
  log "failover: SIGSTOP leader $l (pid ${PID[$l]}) with $(jobs_of failover) Jobs created"
  local deadline=$(( $(date +%s) + 60 ))
  until [[ "$(holder)" == "$id_s"* ]]; do
    [ "$(date +%s)" -lt "$deadline" ] || { fail "failover: standby $s did not take over in 60 s"; kill -CONT "${PID[$l]}"; return; }
    sleep 0.1
  done
  took=$(( $(now_ms) - t_stop_ms ))
  log "failover: $s holds the lease ${took} ms after SIGSTOP; SIGCONT $l in 3 s"
  sleep 3
  kill -CONT "${PID[$l]}"
  wait_complete failover 300 || fail "failover: rollout not complete within 300 s of takeover"
  sleep 5
  stop_sampler
  t_acq=$(acquired_at "nodewright-faults-$s-${GEN[$s]}" "$id_s" "$t_stop")
  [ -n "$t_acq" ] || { fail "failover: no lease acquisition by $s in the audit log"; return; }
  local t_renew after_renew before
  t_renew=$(last_lease_write_before "$ua_l" "$t_stop")
  after_renew=$(( $(iso_ms "$t_acq") - $(iso_ms "$t_renew") ))
  before=$(jq -r --arg ua "$ua_l" 'select(.userAgent == $ua and .stage == "ResponseComplete"
      and (.verb | IN("get", "list", "watch") | not)) | .verb' "$AUDIT" | grep -c . || true)
  writes=$(writes_after "$ua_l" "$t_acq")
  local n_writes; n_writes=$(grep -c . <<< "$writes" || true)
  [ "$n_writes" = 0 ] || { fail "failover: $n_writes writes by the old leader after takeover:"; echo "$writes" >&2; }
  alive "$l" || fail "failover: the old leader exited"
  [ "$(ready_code "$l")" = 200 ] || fail "failover: the old leader (standby now) is not ready"
  check_jobs failover failover; check_done failover failover
  echo "RESULT failover takeover_ms_after_sigstop=$took takeover_ms_after_last_renew=$after_renew lease_duration_ms=15000 acquired_at=$t_acq stopped_at=$t_stop old_leader_writes_total=$before old_leader_writes_after_takeover=$n_writes jobs_created=$JOBS duplicate_jobs=$DUPS max_cordoned=$MAXC old_leader_alive=$(alive "$l" && echo yes || echo no)"
}

killloop() {
  local i l kills=0 during=0 started
  start_slow_pods killloop "${FAULTS_POD_SECONDS}s"
  nodewright killloop
  started=$(date +%s)
  start_sampler killloop
  for ((i = 1; i <= FAULTS_KILLS; i++)); do
    l=$(wait_leader 90) || { fail "killloop: no leader within 90 s (kill $i)"; break; }
    # A random moment of this leader's term: 0.2 .. 2.2 s after it took the lease (its first
    # passes run right away: its caches synced while it was a standby).
    sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))"
    sleep 0.2
    if [ "$(nw_status killloop)" != complete ]; then during=$((during + 1)); fi
    kill -KILL "${PID[$l]}"; kills=$((kills + 1))
    log "killloop: SIGKILL $i/$FAULTS_KILLS leader $l gen ${GEN[$l]} (pid ${PID[$l]}); Jobs so far: $(jobs_of killloop); status: $(nw_status killloop)"
    start_op "$l"
  done
  wait_complete killloop 600 || fail "killloop: rollout not complete within 600 s after the last kill"
  sleep 5
  stop_sampler; stop_slow_pods
  [ "$during" = "$FAULTS_KILLS" ] || fail "killloop: only $during of $kills kills happened during the rollout"
  check_jobs killloop killloop; check_done killloop killloop
  echo "RESULT killloop kills=$kills kills_during_rollout=$during jobs_created=$JOBS duplicate_jobs=$DUPS interrupt_twice=$INTERRUPT_DUPS max_cordoned=$MAXC rollout_s=$(( $(date +%s) - started )) status=$(nw_status killloop)"
}

outage() { # component (kube-apiserver|etcd) pool
  local comp=$1 pool=$2 pa pb pid t0 not_ready=0 exited=0 s
  nodewright "$pool"
  wait_jobs "$pool" 2 120 || { fail "$pool: rollout did not start"; return; }
  start_sampler "$pool"
  pa=${PID[a]}; pb=${PID[b]}
  pid=$(pid_of "$comp") || { fail "$pool: $comp not running"; return; }
  log "$pool: stopping $comp (pid $pid) for ${FAULTS_OUTAGE} s with $(jobs_of "$pool") Jobs created"
  # Stopped = gone: SIGTERM, SIGKILL if it is still shutting down after 5 s.
  kill -TERM "$pid"
  for _ in $(seq 1 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  while [ -d "/proc/$pid" ]; do sleep 0.1; done
  t0=$(date +%s)
  while [ $(( $(date +%s) - t0 )) -lt "$FAULTS_OUTAGE" ]; do
    sleep 2
    for s in a b; do
      alive "$s" || exited=1
      # After the 15 s contact window both replicas must report not-ready.
      if [ $(( $(date +%s) - t0 )) -ge 25 ] && [ "$(ready_code "$s")" = 503 ]; then not_ready=$((not_ready | ($([ $s = a ] && echo 1 || echo 2)))); fi
    done
  done
  log "$pool: starting $comp again"
  NODEWRIGHT_AUDIT_POLICY=$RUN/audit-policy.yaml "$ROOT/tests/cluster/up.sh" > /dev/null
  local t_up; t_up=$(date +%s)
  wait_complete "$pool" 300 || fail "$pool: rollout not complete within 300 s of recovery"
  local recovered=$(( $(date +%s) - t_up ))
  sleep 5
  stop_sampler
  [ "$exited" = 0 ] && [ "${PID[a]}" = "$pa" ] && [ "${PID[b]}" = "$pb" ] && alive a && alive b \
    || fail "$pool: an operator exited during the outage"
  [ "$not_ready" = 3 ] || fail "$pool: not both replicas reported not-ready (mask $not_ready)"
  local r; r="$(ready_code a)/$(ready_code b)"
  [ "$r" = 200/200 ] || fail "$pool: readiness after recovery $r"
  check_jobs "$pool" "$pool"; check_done "$pool" "$pool"
  echo "RESULT $pool outage_s=$FAULTS_OUTAGE complete_s_after_restart=$recovered operators_exited=$exited both_not_ready_during=$([ "$not_ready" = 3 ] && echo yes || echo no) ready_after=$r jobs_created=$JOBS duplicate_jobs=$DUPS max_cordoned=$MAXC status=$(nw_status "$pool")"
}

for sc in "${scenarios[@]}"; do
  log "=== $sc"
  case $sc in
    failover) failover ;;
    killloop) killloop ;;
    apiserver) outage kube-apiserver apiserver ;;
    etcd) outage etcd etcd ;;
    *) fail "unknown scenario $sc" ;;
  esac
done
# Every operator process's trace (deposed and killed leaders included) replays with this commit's
# simulator and core without a differing effect (docs/simulator.md).
stop_ops
cargo build -q -p nodewright-sim --bin nodewright-sim
mapfile -t traces < <(find "$RUN/traces" -name 'op-*.jsonl' | sort)
if "$target_dir/debug/nodewright-sim" replay --show 5 "${traces[@]}" > "$RUN/replay.txt" 2>&1; then
  log "replay: ${#traces[@]} traces, 0 differing effects"
else
  fail "replay: the core decides differently on a recorded snapshot (traces in $RUN/traces)"
fi
cat "$RUN/replay.txt" >&2
[ "$failed" = 0 ] && log "all scenarios passed" || log "some scenarios FAILED"
exit "$failed"
