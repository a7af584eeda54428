#!/usr/bin/env bash
# Scale harness: the real operator (release build) against a real local control plane with NODES
# kwok fake nodes and one NodeWright of PACKAGES packages over all of them. Measures time to
# converge, the operator's RSS (VmRSS / VmHWM), pass and plan durations, then the idle steady
# state, prints one summary line and tears everything down by pid.
#
# Usage: tests/scale/run.sh [NODES] [PACKAGES]      (defaults 500 2)
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
OUT=$RUN/results/${NODES}x${PACKAGES}-$(date +%Y%m%dT%H%M%S)
mkdir -p "$OUT"
OP_PID_FILE=$RUN/pids/nodewright-operator.pid
OP_LOG=$OUT/operator.log

# --- teardown by pid ---------------------------------------------------------------------------
op_pid() { # the recorded operator pid while it still runs the operator
  local pid
  [ -f "$OP_PID_FILE" ] || return 1
  pid=$(cat "$OP_PID_FILE")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q nodewright-operator || return 1
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
  [ "${SCALE_KEEP:-0}" = 1 ] && { scale_say "SCALE_KEEP=1: leaving the cluster and operator running"; return; }
  stop_operator
  tests/cluster/down.sh >/dev/null 2>&1 || true
}
trap teardown EXIT

# --- the operator binary (release) -------------------------------------------------------------
if [ -n "${SCALE_OPERATOR_BIN:-}" ]; then
  OPERATOR_BIN=$SCALE_OPERATOR_BIN
else
  scale_say "building the operator (release)"
  cargo build -q --release -p nodewright-shell --bin nodewright-operator
  target_dir=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
  OPERATOR_BIN=$target_dir/release/nodewright-operator
fi
[ -x "$OPERATOR_BIN" ] || { scale_say "no operator binary at $OPERATOR_BIN"; exit 1; }

# --- a fresh control plane ---------------------------------------------------------------------
stop_operator
tests/cluster/down.sh >/dev/null 2>&1 || true
t0=$(date +%s.%N)
tests/cluster/up.sh >/dev/null
export KUBECONFIG=$KUBECONFIG_PATH
up_s=$(echo "$(date +%s.%N) - $t0" | bc)

# --- NODES kwok nodes, created in bulk (4 parallel kubectl creates) ----------------------------
node_doc() { # index
  local b; b=$(cat /proc/sys/kernel/random/uuid)
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: scale-node-$1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: scale-node-$1, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok, nodewright.test/fake: "true", nodewright.test/scale: "true"}
status:
  nodeInfo: {bootID: $b, machineID: ${b//-/}, systemUUID: $b, architecture: amd64, operatingSystem: linux, osImage: kwok fake node}
EOF
}
t0=$(date +%s.%N)
mkdir -p "$OUT/nodes"
for ((i = 0; i < NODES; i++)); do node_doc "$i" >> "$OUT/nodes/part-$((i % 4)).yaml"; done
pids=()
for f in "$OUT"/nodes/part-*.yaml; do kc create -f "$f" >/dev/null & pids+=($!); done
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
kc get namespace nodewright >/dev/null 2>&1 || kc create namespace nodewright >/dev/null
for _ in $(seq 1 120); do kc -n nodewright get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
kc wait --for=condition=Established --timeout=60s crd/nodewrights.nodewright.nvidia.com >/dev/null

# --- the operator ------------------------------------------------------------------------------
(
  export KUBECONFIG NAMESPACE=nodewright ENABLE_WEBHOOKS=false LEADER_ELECTION=false \
    METRICS_PORT=127.0.0.1:$MPORT PROBE_PORT=127.0.0.1:$PPORT LOG_ENCODER=json \
    RUST_LOG="info,nodewright_shell::runner=debug"
  for kv in ${SCALE_OPERATOR_ENV:-}; do export "${kv?}"; done
  setsid "$OPERATOR_BIN" >> "$OP_LOG" 2>&1 < /dev/null &
  echo $! > "$OP_PID_FILE"
)
OP=$(cat "$OP_PID_FILE")
for ((i = 0; i < 600; i++)); do
  [ "$(curl -fsS --max-time 2 "http://127.0.0.1:$PPORT/readyz" 2>/dev/null)" = ok ] && break
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
printf 't_s\tphase\trss_mib\thwm_mib\tpasses\tpass_sum_s\tcomplete\tstatus\tjobs_cached\tpods_cached\n' > "$OUT/samples.tsv"
sample() { # phase t0 -> prints rss_mib
  local phase=$1 since=$2 rss hwm st comp jobs pods
  curl -fsS --max-time 5 "http://127.0.0.1:$MPORT/metrics" > "$OUT/metrics.txt" 2>/dev/null || : > "$OUT/metrics.txt"
  rss=$(kib VmRSS); hwm=$(kib VmHWM)
  st=$(kc get nodewright scale -o jsonpath='{.status.status}|{.status.completeNodes}' 2>/dev/null || echo '|')
  jobs=$(awk '$1 ~ /^nodewright_operator_cache_objects\{kind="job"\}/ {print $2}' "$OUT/metrics.txt")
  pods=$(awk '$1 ~ /^nodewright_operator_cache_objects\{kind="pod"\}/ {print $2}' "$OUT/metrics.txt")
  comp=${st#*|}; st=${st%%|*}
  printf '%.0f\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(echo "$(date +%s.%N) - $since" | bc)" "$phase" \
    "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" \
    "$(metric nodewright_operator_passes_total)" "$(metric nodewright_operator_pass_duration_seconds_sum)" \
    "${comp:--}" "${st:--}" "${jobs:--}" "${pods:--}" >> "$OUT/samples.tsv"
  LAST_STATUS=$st
}
sleep 3
sample synced "$(date +%s.%N)"
rss_synced=$(kib VmRSS)

# --- the NodeWright ----------------------------------------------------------------------------
{
  cat <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata:
  name: scale
spec:
  nodeSelectors:
    matchLabels:
      nodewright.test/scale: "true"
  interruptionBudget:
    percent: $PERCENT
  packages:
EOF
  for ((p = 0; p < PACKAGES; p++)); do
    printf '    pkg-%d:\n      version: 1.0.%d\n      image: example.invalid/scale/pkg-%d\n' "$p" "$p" "$p"
  done
} > "$OUT/nodewright.yaml"
cpu_before=$(cpu_all)
t_apply=$(date +%s.%N)
kc apply -f "$OUT/nodewright.yaml" >/dev/null
scale_say "NodeWright applied: $NODES nodes x $PACKAGES packages, budget $PERCENT %"
LAST_STATUS=""
converge_s=timeout
while :; do
  sample rollout "$t_apply"
  if [ "$LAST_STATUS" = complete ]; then converge_s=$(echo "$(date +%s.%N) - $t_apply" | bc); break; fi
  [ -d "/proc/$OP" ] || { tail -n 40 "$OP_LOG" >&2; scale_say "operator died"; exit 1; }
  if [ "$(echo "$(date +%s.%N) - $t_apply > $TIMEOUT" | bc)" = 1 ]; then
    scale_say "not complete after ${TIMEOUT}s"; break
  fi
  tail -n 1 "$OUT/samples.tsv" | awk -F'\t' '{printf "[scale] t=%ss rss=%s MiB hwm=%s MiB passes=%s complete=%s status=%s jobs=%s\n", $1, $3, $4, $5, $7, $8, $9}' >&2
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
  kc annotate nodewright scale "scale.nodewright.test/poke=$poke" --overwrite >/dev/null
  sleep "$SAMPLE"; sample idle "$t_idle"
done
rss_idle=$(kib VmRSS); hwm_final=$(kib VmHWM)

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
read -r -a cb <<< "$cpu_before"; read -r -a ca <<< "$cpu_after"
cpu_delta=""
for i in 0 1 2 3 4; do cpu_delta+="$(echo "scale=1; (${ca[$i]} - ${cb[$i]}) / 1" | bc) "; done
summary=$(printf 'nodes=%s packages=%s budget=%s%% up=%.0fs nodes_ready=%.0fs converge_s=%s passes=%s peak_rss=%sMiB rss_per_node=%sMiB peak_incl_idle=%sMiB synced_rss=%sMiB idle_rss=%sMiB idle_per_node=%sMiB go_chart_request=%sMiB go_chart_limit=%sMiB pass_ms(median/max/n)=%s/%s/%s plan_ms(median/max)=%s/%s idle_plan_ms(median/max/n)=%s/%s/%s cpu_s(operator/apiserver/etcd/kcm/kwok)=%s' \
  "$NODES" "$PACKAGES" "$PERCENT" "$up_s" "$ready_s" "$converge_s" "$passes_rollout" \
  "$(mib "$hwm_rollout")" "$(per_node "$hwm_rollout")" "$(mib "$hwm_final")" "$(mib "$rss_synced")" "$(mib "$rss_idle")" "$(per_node "$rss_idle")" \
  "$go_req" "$go_lim" "$took_med" "$took_max" "$took_n" "$plan_med" "$plan_max" "$iplan_med" "$iplan_max" "$iplan_n" \
  "${cpu_delta% }")
echo "$summary" > "$OUT/summary.txt"
printf '%s\t%s\n' "$(date -u +%FT%TZ)" "$summary" >> "$RUN/results/summary.tsv"
scale_say "results in $OUT"
echo "$summary"
exit
}
