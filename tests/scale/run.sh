#!/usr/bin/env bash
# Scale harness: the real operator (release build) against a real local control plane with NODES
# kwok fake nodes and one NodeWright of PACKAGES packages over all of them. Measures time to
# converge, the operator's RSS (VmRSS / VmHWM), pass and plan durations, then the idle steady
# state, prints one summary line and tears everything down by pid.
#
# Usage: tests/scale/run.sh [NODES] [PACKAGES]      (defaults 500 2)
#
# The same harness runs the Go operator (NVIDIA/nodewright operator/v0.15.0, `skyhook.nvidia.com`,
# bare pods) for the side-by-side comparison (tests/peer/run.sh runs both on one cluster).
# Env:   NODEWRIGHT_RUN          run directory (default /tmp/nodewright-scale); the cluster ports
#                                default to ETCD 26790/26800, apiserver 8443, KCM 12257, kwok 12247
#        SCALE_METRICS_PORT      operator /metrics port (18180); SCALE_PROBE_PORT (18181)
#        SCALE_PERCENT           interruptionBudget percent (20)
#        SCALE_TIMEOUT           seconds to wait for the NodeWright to complete (600)
#        SCALE_IDLE              seconds of idle steady state measured after completion (60)
#        SCALE_READY_TIMEOUT     seconds to wait for the nodes to be Ready and untainted (420)
#        SCALE_SAMPLE            sampling period in seconds (3)
#        SCALE_KEEP=1            leave the cluster and the operator running at the end
#        SCALE_OPERATOR_BIN      use this operator binary instead of building one
#        SCALE_OPERATOR_ENV      extra operator environment, space separated K=V (e.g. JOB_TTL_SUCCEEDED=1m)
#        SCALE_OPERATOR=go       run the Go operator instead (built by tests/peer/build.sh from
#                                SCALE_GO_SRC, default ~/.cache/nodewright/src/nodewright-go-v0.15.0;
#                                its CRDs from that tree's chart, webhooks off, namespace skyhook)
#        SCALE_KCM_QPS           kube-controller-manager --kube-api-qps (burst 2x); unset = its
#                                default (20, burst 30)
#        SCALE_REUSE=1           keep a running cluster (creating missing nodes) instead of starting
#                                a fresh one; SCALE_KEEP_CLUSTER=1 stops the operator and cleans its
#                                objects at the end but keeps the cluster
#        SCALE_SMOKE=1           fail (exit 1) unless the rollout completed within SCALE_TIMEOUT and
#                                the stage latencies and the operator's audited requests were
#                                measured (the CI smoke, tests/run-all.sh)
#        SCALE_IDLE_ONLY=1       the NodeWright selects no node: measures an operator idling over
#                                the fleet (caches, watches, passes) for SCALE_IDLE seconds
# Output: $NODEWRIGHT_RUN/results/<NODES>x<PACKAGES>-<time>/{samples.tsv,operator.log,summary.txt}
#         and one line appended to $NODEWRIGHT_RUN/results/summary.tsv.
set -euo pipefail
# The whole script is one compound command, parsed before it runs: editing this file during a run
# does not break the run.
{
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

NODES=${1:-500}; PACKAGES=${2:-2}
[[ "$NODES" =~ ^[0-9]+$ && "$PACKAGES" =~ ^[0-9]+$ && $NODES -gt 0 && $PACKAGES -gt 0 ]] \
  || { echo "usage: $0 [NODES] [PACKAGES]" >&2; exit 2; }

export NODEWRIGHT_RUN=${NODEWRIGHT_RUN:-/tmp/nodewright-scale}
export ETCD_PORT=${ETCD_PORT:-26790} ETCD_PEER_PORT=${ETCD_PEER_PORT:-26800}
export APISERVER_PORT=${APISERVER_PORT:-8443} KCM_PORT=${KCM_PORT:-12257} KWOK_PORT=${KWOK_PORT:-12247}
MPORT=${SCALE_METRICS_PORT:-18180}; PPORT=${SCALE_PROBE_PORT:-18181}
PERCENT=${SCALE_PERCENT:-20}; TIMEOUT=${SCALE_TIMEOUT:-600}; IDLE=${SCALE_IDLE:-60}; SAMPLE=${SCALE_SAMPLE:-3}

# shellcheck source-path=SCRIPTDIR source=../cluster/lib.sh
. tests/cluster/lib.sh
scale_say() { printf '[scale %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
IMPL=${SCALE_OPERATOR:-nodewright}
case $IMPL in nodewright|go) ;; *) echo "SCALE_OPERATOR must be nodewright or go" >&2; exit 2 ;; esac
OUT=$RUN/results/${IMPL}-${NODES}x${PACKAGES}-$(date +%Y%m%dT%H%M%S)
mkdir -p "$OUT"
OP_PID_FILE=$RUN/pids/nodewright-operator.pid
OP_LOG=$OUT/operator.log

# --- teardown by pid ---------------------------------------------------------------------------
op_pid() { # the recorded operator pid while it still runs the operator
  local pid
  [ -f "$OP_PID_FILE" ] || return 1
  pid=$(cat "$OP_PID_FILE")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  # The operator binary, whatever it is named (SCALE_OPERATOR_BIN), or the default ones.
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null \
    | grep -Fq -e nodewright-operator -e /manager -e "${SCALE_OPERATOR_BIN:-nodewright-operator}" || return 1
  echo "$pid"
}
stop_operator() {
  local pid i
  pid=$(op_pid) || { rm -f "$OP_PID_FILE"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null
  rm -f "$OP_PID_FILE"
}
# shellcheck disable=SC2317  # invoked by the EXIT trap
teardown() {
  [ -n "${WATCH_PID:-}" ] && kill "$WATCH_PID" 2>/dev/null
  [ "${SCALE_KEEP:-0}" = 1 ] && { scale_say "SCALE_KEEP=1: leaving the cluster and operator running"; return; }
  if [ "${SCALE_KEEP_CLUSTER:-0}" = 1 ]; then clean_operator_objects; stop_operator; return; fi
  stop_operator
  tests/cluster/down.sh >/dev/null 2>&1 || true
}
# Remove what this run's operator left: its CR (finalizers dropped), its executors, and its node
# labels/annotations, so that the next operator starts on the same fleet.
clean_operator_objects() {
  [ -n "${KUBECONFIG:-}" ] || return 0
  local prefix keys k
  if [ "$IMPL" = go ]; then prefix=skyhook.nvidia.com/; else prefix=nodewright.nvidia.com/; fi
  stop_operator
  kc patch "$CR_KIND" scale --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
  kc delete "$CR_KIND" scale --wait=false >/dev/null 2>&1 || true
  kc -n "$OP_NS" delete jobs --all --cascade=background --wait=false >/dev/null 2>&1 || true
  kc -n "$OP_NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  keys=$(kc get nodes -l nodewright.test/scale=true -o json | jq -r --arg p "$prefix" \
    '[.items[].metadata | ((.labels // {}) | keys[]), ((.annotations // {}) | keys[])] | unique[] | select(startswith($p))')
  for k in $keys; do
    kc label nodes -l nodewright.test/scale=true "$k-" >/dev/null 2>&1 || true
    kc annotate nodes -l nodewright.test/scale=true "$k-" >/dev/null 2>&1 || true
  done
  kc uncordon -l nodewright.test/scale=true >/dev/null 2>&1 || true
  # Its node conditions (<prefix><name>/NotReady, .../Erroring) live in the nodes' status: each
  # node's status is replaced without its resourceVersion (a heartbeat in between cannot
  # conflict), so the next operator starts from the nodes this run started from.
  kc get nodes -l nodewright.test/scale=true -o json \
    | jq --arg p "$prefix" '.items |= map(del(.metadata.resourceVersion, .metadata.managedFields)
        | .status.conditions |= map(select(.type | startswith($p) | not)))' \
    | kc replace --subresource=status -f - >/dev/null 2>&1 || scale_say "node conditions not cleaned"
  for _ in $(seq 1 300); do
    [ "$(kc -n "$OP_NS" get pods -o name 2>/dev/null | wc -l)" = 0 ] && break; sleep 1
  done
  scale_say "cleaned up after $IMPL ($(echo "$keys" | wc -w) node keys removed)"
}
trap teardown EXIT

# --- the operator binary (release) -------------------------------------------------------------
if [ "$IMPL" = go ]; then
  CR_KIND=skyhooks.skyhook.nvidia.com; CR_API=skyhook.nvidia.com/v1alpha1; CR_K=Skyhook; OP_NS=skyhook
  GO_SRC=${SCALE_GO_SRC:-$HOME/.cache/nodewright/src/nodewright-go-v0.15.0}
  OPERATOR_BIN=${SCALE_OPERATOR_BIN:-$(tests/peer/build.sh "$GO_SRC")}
  AGENT=manager
else
  CR_KIND=nodewrights.nodewright.nvidia.com; CR_API=nodewright.nvidia.com/v1alpha1; CR_K=NodeWright; OP_NS=nodewright
  AGENT=nodewright-operator
fi
if [ -n "${OPERATOR_BIN:-}" ]; then :
elif [ -n "${SCALE_OPERATOR_BIN:-}" ]; then
  OPERATOR_BIN=$SCALE_OPERATOR_BIN
else
  scale_say "building the operator (release)"
  cargo build -q --release -p nodewright-shell --bin nodewright-operator
  target_dir=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
  OPERATOR_BIN=$target_dir/release/nodewright-operator
fi
[ -x "$OPERATOR_BIN" ] || { scale_say "no operator binary at $OPERATOR_BIN"; exit 1; }

# --- a fresh control plane ---------------------------------------------------------------------
# Scale settings of the control plane: nodes are admitted without the not-ready taint and created
# Ready (below), kwok renews leases rarely and kube-controller-manager waits long before marking a
# node unknown, so 10,000 nodes are ready in minutes and the idle cluster stays quiet.
export NODEWRIGHT_AUDIT_POLICY=${NODEWRIGHT_AUDIT_POLICY:-$ROOT/tests/scale/audit-policy.yaml}
export NODEWRIGHT_APISERVER_ARGS="--disable-admission-plugins=TaintNodesByCondition --max-requests-inflight=800 --max-mutating-requests-inflight=400"
export NODEWRIGHT_KWOK_LEASE_SECONDS=3600 NODEWRIGHT_NODE_MONITOR_GRACE=2h
QPS=${SCALE_KCM_QPS:-}
export NODEWRIGHT_KCM_ARGS=${QPS:+--kube-api-qps=$QPS --kube-api-burst=$((QPS * 2))}
stop_operator
t0=$(date +%s.%N)
if [ "${SCALE_REUSE:-0}" = 1 ] && apiserver_ready 2>/dev/null; then
  scale_say "reusing the running cluster in $RUN"
else
  tests/cluster/down.sh >/dev/null 2>&1 || true
  # A fresh cluster starts a fresh audit log: drop the rotated files of earlier clusters too
  # (100 MB each; a 10,000-node sitting leaves a dozen, and they filled the disk once).
  rm -f "$LOGS"/audit*.log
  tests/cluster/up.sh >/dev/null
fi
export KUBECONFIG=$KUBECONFIG_PATH
up_s=$(echo "$(date +%s.%N) - $t0" | bc)
kcm_qps=$(tr '\0' ' ' < "/proc/$(pid_of kube-controller-manager)/cmdline" | grep -o -- '--kube-api-qps=[0-9]*' | cut -d= -f2 || true)
kcm_qps=${kcm_qps:-20}

# --- NODES kwok nodes, created in bulk (4 parallel kubectl creates) ----------------------------
t0=$(date +%s.%N)
mkdir -p "$OUT/nodes"
# One awk writes every missing node's document (random boot ids): fast enough for 10,000 nodes.
kc get nodes -l nodewright.test/scale=true -o name | sed 's#^node/##' > "$OUT/nodes/have.txt"
awk -v n="$NODES" -v now="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v dir="$OUT/nodes" -v have="$OUT/nodes/have.txt" '
  function h(k,   s, j) { s = ""; for (j = 0; j < k; j++) s = s sprintf("%04x", int(rand() * 65536)); return s }
  BEGIN {
    srand()
    split("Ready MemoryPressure DiskPressure PIDPressure NetworkUnavailable", ct, " ")
    split("True False False False False", cs, " ")
    split("KubeletReady KubeletHasSufficientMemory KubeletHasNoDiskPressure KubeletHasSufficientPID RouteCreated", cr, " ")
    while ((getline l < have) > 0) seen[l] = 1
    for (i = 0; i < n; i++) {
      name = "scale-node-" i
      if (name in seen) continue
      b = h(2) "-" h(1) "-" h(1) "-" h(1) "-" h(3); m = b; gsub("-", "", m)
      f = dir "/part-" (i % 4) ".yaml"
      print "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: " name > f
      print "  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: \"0\"}" > f
      print "  labels: {kubernetes.io/hostname: " name ", kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok, nodewright.test/fake: \"true\", nodewright.test/scale: \"true\"}" > f
      print "status:\n  nodeInfo: {bootID: " b ", machineID: " m ", systemUUID: " b ", architecture: amd64, operatingSystem: linux, osImage: kwok fake node}" > f
      print "  phase: Running\n  capacity: {cpu: \"32\", memory: 256Gi, pods: \"110\"}\n  allocatable: {cpu: \"32\", memory: 256Gi, pods: \"110\"}" > f
      # the conditions the kwok heartbeat writes, so that heartbeats only move timestamps
      print "  conditions:" > f
      for (c = 1; c <= 5; c++) print "  - {type: " ct[c] ", status: \"" cs[c] "\", reason: " cr[c] ", message: kwok, lastHeartbeatTime: \"" now "\", lastTransitionTime: \"" now "\"}" > f
    }
  }'
pids=()
for f in "$OUT"/nodes/part-*.yaml; do [ -f "$f" ] || continue; kc create -f "$f" >/dev/null & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
create_s=$(echo "$(date +%s.%N) - $t0" | bc)
scale_say "$NODES nodes created in ${create_s}s; waiting until all are Ready and untainted"
ready_count() {
  kc get nodes -l nodewright.test/scale=true -o json \
    | jq '[.items[] | select((.status.conditions // []) | any(.type == "Ready" and .status == "True"))
                  | select((.spec.taints // []) | all(.key != "node.kubernetes.io/not-ready"))
                  | select((.status.nodeInfo.bootID // "") != "")] | length'
}
deadline=$(( $(date +%s) + ${SCALE_READY_TIMEOUT:-420} ))
while [ "$(ready_count)" -lt "$NODES" ]; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    scale_say "WARNING: only $(ready_count)/$NODES nodes Ready and untainted after ${SCALE_READY_TIMEOUT:-420}s; going on"
    break
  fi
  sleep 2
done
ready_s=$(echo "$(date +%s.%N) - $t0" | bc)
scale_say "$NODES nodes ready ${ready_s}s after the first create"

# --- namespace, CRDs ---------------------------------------------------------------------------
kc get namespace "$OP_NS" >/dev/null 2>&1 || kc create namespace "$OP_NS" >/dev/null
for _ in $(seq 1 120); do kc -n "$OP_NS" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
if [ "$IMPL" = go ]; then
  # The Go chart's CRDs (Helm templates), rendered at run time; conversion webhook off (one version).
  "$HELM_BIN/helm" template peer "$GO_SRC/chart" --namespace "$OP_NS" \
    --show-only templates/skyhook-crd.yaml --show-only templates/deploymentpolicy-crd.yaml \
    | kc apply --server-side --force-conflicts -f - >/dev/null
  for c in skyhooks.skyhook.nvidia.com deploymentpolicies.skyhook.nvidia.com; do
    kc patch crd "$c" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
  done
else
  kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
fi
# Right after the apply a CRD may have no status yet, which kubectl wait reports as an error
# instead of waiting: retry (lib.sh wait_for) for up to 60 s.
wait_for 60 "CRDs Established" kc wait --for=condition=Established --timeout=5s "crd/$CR_KIND" || exit 1

# --- the operator ------------------------------------------------------------------------------
(
  export KUBECONFIG NAMESPACE=$OP_NS ENABLE_WEBHOOKS=false LEADER_ELECTION=false \
    METRICS_PORT=127.0.0.1:$MPORT PROBE_PORT=127.0.0.1:$PPORT LOG_ENCODER=json \
    RUST_LOG="info,nodewright_shell::runner=debug" NODEWRIGHT_USER_AGENT=nodewright-operator LOG_LEVEL=info
  for kv in ${SCALE_OPERATOR_ENV:-}; do export "${kv?}"; done
  setsid "$OPERATOR_BIN" >> "$OP_LOG" 2>&1 < /dev/null &
  echo $! > "$OP_PID_FILE"
)
OP=$(cat "$OP_PID_FILE")
t_op=$(date +%s.%N)
for ((i = 0; i < 600; i++)); do
  curl -fsS --max-time 2 "http://127.0.0.1:$PPORT/readyz" >/dev/null 2>&1 && break
  [ -d "/proc/$OP" ] || { tail -n 40 "$OP_LOG" >&2; scale_say "operator exited"; exit 1; }
  sleep 0.1
done
scale_say "operator ready (pid $OP, log $OP_LOG)"

# --- sampling helpers --------------------------------------------------------------------------
kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$OP/status"; }
cpu_s() { # pid: user+system CPU seconds
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || echo 0
}
metric() { # name: value of an unlabelled sample in the last scrape
  awk -v n="$1" '$1 == n {print $2}' "$OUT/metrics.txt" | head -1
}
cpu_all() { # "operator apiserver etcd kcm kwok" CPU seconds
  local c; c="$(cpu_s "$OP")"
  for n in kube-apiserver etcd kube-controller-manager kwok; do c+=" $(cpu_s "$(pid_of "$n")")"; done
  echo "$c"
}
mib_or_dash() { # bytes (possibly in exponent form) -> MiB with one decimal, or - when absent
  [ -n "$1" ] && awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}' || echo -
}
printf 't_s\tphase\trss_mib\thwm_mib\tpasses\tpass_sum_s\tcomplete\tstatus\tjobs_cached\tpods_cached\theap_mib\theap_free_mib\n' > "$OUT/samples.tsv"
sample() { # phase t0 -> prints rss_mib
  local phase=$1 since=$2 rss hwm st comp jobs pods heap free
  curl -fsS --max-time 5 "http://127.0.0.1:$MPORT/metrics" > "$OUT/metrics.txt" 2>/dev/null || : > "$OUT/metrics.txt"
  rss=$(kib VmRSS); hwm=$(kib VmHWM)
  st=$(kc get "$CR_KIND" scale -o jsonpath='{.status.status}|{.status.completeNodes}' 2>/dev/null || echo '|')
  jobs=$(awk '$1 ~ /^nodewright_operator_cache_objects\{kind="job"\}/ {print $2}' "$OUT/metrics.txt")
  pods=$(awk '$1 ~ /^nodewright_operator_cache_objects\{kind="pod"\}/ {print $2}' "$OUT/metrics.txt")
  heap=$(metric nodewright_operator_heap_in_use_bytes); free=$(metric nodewright_operator_heap_free_bytes)
  comp=${st#*|}; st=${st%%|*}
  printf '%.0f\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(echo "$(date +%s.%N) - $since" | bc)" "$phase" \
    "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" \
    "$(metric nodewright_operator_passes_total)" "$(metric nodewright_operator_pass_duration_seconds_sum)" \
    "${comp:--}" "${st:--}" "${jobs:--}" "${pods:--}" "$(mib_or_dash "$heap")" "$(mib_or_dash "$free")" >> "$OUT/samples.tsv"
  LAST_STATUS=$st
}
sleep 3
sample synced "$(date +%s.%N)"
rss_synced=$(kib VmRSS)

# --- the NodeWright ----------------------------------------------------------------------------
SEL=true; [ "${SCALE_IDLE_ONLY:-0}" = 1 ] && SEL=none
{
  cat <<EOF
apiVersion: $CR_API
kind: $CR_K
metadata:
  name: scale
spec:
  nodeSelectors:
    matchLabels:
      nodewright.test/scale: "$SEL"
  interruptionBudget:
    percent: $PERCENT
  packages:
EOF
  # Package names end with a letter (the Go operator's validation): pkg-a, pkg-b, ..., pkg-a-b, ...
  for ((p = 0; p < PACKAGES; p++)); do
    name=pkg; q=$p
    while :; do name+="-$(printf "\\$(printf %o $((97 + q % 26)))")"; q=$((q / 26)); [ "$q" -gt 0 ] || break; done
    printf '    %s:\n      version: 1.0.%d\n      image: example.invalid/scale/%s\n' "$name" "$p" "$name"
  done
} > "$OUT/nodewright.yaml"
cpu_before=$(cpu_all)
mode=job; [ "$IMPL" = go ] && mode=pod
python3 tests/scale/stages.py watch "$RUN" "$APISERVER_PORT" "$OP_NS" "$mode" "$OUT/stages.tsv" 2>>"$OUT/stages.err" &
WATCH_PID=$!
sleep 1
t_apply=$(date +%s.%N)
kc apply -f "$OUT/nodewright.yaml" >/dev/null
scale_say "$CR_K applied: $NODES nodes x $PACKAGES packages, budget $PERCENT %, operator $IMPL"
LAST_STATUS=""
converge_s=timeout
while [ "$SEL" = true ]; do
  sample rollout "$t_apply"
  if [ "$LAST_STATUS" = complete ]; then converge_s=$(echo "$(date +%s.%N) - $t_apply" | bc); break; fi
  [ -d "/proc/$OP" ] || { tail -n 40 "$OP_LOG" >&2; scale_say "operator died"; exit 1; }
  if [ "$(echo "$(date +%s.%N) - $t_apply > $TIMEOUT" | bc)" = 1 ]; then
    scale_say "not complete after ${TIMEOUT}s"; break
  fi
  tail -n 1 "$OUT/samples.tsv" | awk -F'\t' '{printf "[scale] t=%ss rss=%s MiB hwm=%s MiB passes=%s complete=%s status=%s jobs=%s heap=%s MiB\n", $1, $3, $4, $5, $7, $8, $9, $11}' >&2
  sleep "$SAMPLE"
done
cpu_after=$(cpu_all)
hwm_rollout=$(kib VmHWM)
passes_rollout=$(metric nodewright_operator_passes_total)

# --- idle steady state -------------------------------------------------------------------------
t_idle=$(date +%s.%N)
idle_start_line=$(wc -l < "$OP_LOG")
scale_say "measuring the idle steady state for ${IDLE}s"
# Each sample also pokes the NodeWright (an annotation change) so that the operator runs a full
# pass over the converged cluster: those "idle pass" lines give the steady-state plan time.
poke=0
while [ "$(echo "$(date +%s.%N) - $t_idle < $IDLE" | bc)" = 1 ]; do
  poke=$((poke + 1))
  kc annotate "$CR_KIND" scale "scale.nodewright.test/poke=$poke" --overwrite >/dev/null
  sleep "$SAMPLE"; sample idle "$t_idle"
done
rss_idle=$(kib VmRSS); hwm_final=$(kib VmHWM); rss_file_idle=$(kib RssFile)
heap_idle=$(metric nodewright_operator_heap_in_use_bytes)
cpu_end=$(cpu_all)
t_end=$(date +%s.%N)
kill "$WATCH_PID" 2>/dev/null; WATCH_PID=
stage_stats=$(python3 tests/scale/stages.py stats "$OUT/stages.tsv" "$t_apply" 2>/dev/null || echo "stages=-")
python3 tests/scale/audit.py "$LOGS"/audit*.log --since "$t_op" --until "$t_end" > "$OUT/audit.tsv" 2>/dev/null || true
# requests of the operator (its user agent) by verb, and of kube-controller-manager in total
req_verbs=$(awk -F'\t' -v a="$AGENT" '$1 == a && NF == 4 {v[$2] += $4} END {for (k in v) printf "%s=%d,", k, v[k]}' "$OUT/audit.tsv")
req_total=$(awk -F'\t' -v a="$AGENT" '$1 == a && NF == 2 {print $2}' "$OUT/audit.tsv")
req_kcm=$(awk -F'\t' '$1 == "kube-controller-manager" && NF == 2 {print $2}' "$OUT/audit.tsv")

# --- summary -----------------------------------------------------------------------------------
# pass/plan milliseconds from the log: "pass" lines (passes with effects) during the rollout,
# "idle pass" lines (plan only, no effects) during the idle phase.
stats() { # prints "median max count" of numbers on stdin
  sort -n | awk '{a[NR] = $1} END {if (NR == 0) {print "- - 0"} else {print a[int((NR + 1) / 2)], a[NR], NR}}'
}
read -r took_med took_max took_n < <(head -n "$idle_start_line" "$OP_LOG" | jq -r 'select(.fields.message == "pass" or .message == "pass") | (.fields.took_ms // .took_ms)' 2>/dev/null | stats)
read -r plan_med plan_max _ < <(head -n "$idle_start_line" "$OP_LOG" | jq -r 'select(.fields.message == "pass" or .message == "pass") | (.fields.plan_ms // .plan_ms)' 2>/dev/null | stats)
read -r iplan_med iplan_max iplan_n < <(tail -n "+$idle_start_line" "$OP_LOG" | jq -r 'select(.fields.message == "idle pass" or .message == "idle pass") | (.fields.plan_ms // .plan_ms)' 2>/dev/null | stats)
mib() { echo "scale=1; $1 / 1024" | bc; }
per_node() { echo "scale=3; $1 / 1024 / $NODES" | bc; }
go_req=$(echo "scale=1; if ($NODES * 0.4 > 256) $NODES * 0.4 else 256" | bc)
k=$(echo "scale=2; if ($PACKAGES * 0.4 > 1) $PACKAGES * 0.4 else 1" | bc)
go_lim=$(echo "scale=1; x = $NODES * 0.8 * $k; if (x > 512) x else 512" | bc)
read -r -a cb <<< "$cpu_before"; read -r -a ca <<< "$cpu_after"; read -r -a ce <<< "$cpu_end"
cpu_delta=""; cpu_idle=""
for i in 0 1 2 3 4; do
  cpu_delta+="$(echo "scale=1; (${ca[$i]} - ${cb[$i]}) / 1" | bc) "
  cpu_idle+="$(echo "scale=1; (${ce[$i]} - ${ca[$i]}) / 1" | bc) "
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo -)
summary=$(printf 'operator=%s commit=%s kcm_qps=%s load=%s %s requests(%s: total=%s %s; kcm total=%s) idle_cpu_s(operator/apiserver/etcd/kcm/kwok)=%s ' \
  "$IMPL" "$commit" "$kcm_qps" "${load// //}" "$stage_stats" "$AGENT" "${req_total:--}" "${req_verbs%,}" "${req_kcm:--}" "${cpu_idle% }")$(printf 'nodes=%s packages=%s budget=%s%% up=%.0fs nodes_ready=%.0fs converge_s=%s passes=%s peak_rss=%sMiB rss_per_node=%sMiB peak_incl_idle=%sMiB synced_rss=%sMiB idle_rss=%sMiB idle_rss_file=%sMiB idle_heap_in_use=%sMiB idle_per_node=%sMiB go_chart_request=%sMiB go_chart_limit=%sMiB pass_ms(median/max/n)=%s/%s/%s plan_ms(median/max)=%s/%s idle_plan_ms(median/max/n)=%s/%s/%s cpu_s(operator/apiserver/etcd/kcm/kwok)=%s' \
  "$NODES" "$PACKAGES" "$PERCENT" "$up_s" "$ready_s" "$converge_s" "$passes_rollout" \
  "$(mib "$hwm_rollout")" "$(per_node "$hwm_rollout")" "$(mib "$hwm_final")" "$(mib "$rss_synced")" "$(mib "$rss_idle")" "$(mib "$rss_file_idle")" "$(mib_or_dash "$heap_idle")" "$(per_node "$rss_idle")" \
  "$go_req" "$go_lim" "$took_med" "$took_max" "$took_n" "$plan_med" "$plan_max" "$iplan_med" "$iplan_max" "$iplan_n" \
  "${cpu_delta% }")
echo "$summary" > "$OUT/summary.txt"
printf '%s\t%s\n' "$(date -u +%FT%TZ)" "$summary" >> "$RUN/results/summary.tsv"
scale_say "results in $OUT"
echo "$summary"
if [ "${SCALE_SMOKE:-0}" = 1 ]; then
  fail=""
  [ "$converge_s" != timeout ] || fail+=" not complete after ${TIMEOUT}s;"
  grep -q 'stage_pairs=[1-9]' <<< "$stage_stats" || fail+=" no stage-to-stage latency measured;"
  [ "${req_total:-0}" -gt 0 ] || fail+=" no audited request of $AGENT;"
  [ -z "$fail" ] || { scale_say "SMOKE FAILED:$fail"; exit 1; }
  scale_say "smoke ok"
fi
exit
}
