#!/usr/bin/env bash
# Issue 16 proof (b), by hand: the real Go operator (built from its source by tests/peer/build.sh)
# is stopped mid-rollout on the local cluster, `kubectl nodewright migrate` takes over, and our
# operator finishes the rollout. Prints executor counts per node and stage before and after.
#
# Rollout: Skyhook peer-mig, packages pm-a (reboot interrupt) and pm-b, nodes peer-mig-0..2.
#   peer-mig-0  selected from the start: the Go operator completes it;
#   peer-mig-1  selected from the start but powered down in kwok first (tests/cluster/node.sh down),
#               so the Go operator's first executor pod there stays unstarted ("running");
#   peer-mig-2  selected only after the migration: not started under the Go operator.
# The Go operator is stopped (SIGTERM) once peer-mig-0 is complete; `migrate --apply` waits for the
# legacy pod on peer-mig-1, which ends when the node is powered up again; then ours runs.
#
# Usage: tests/peer/migrate.sh SRC_DIR     (e.g. ~/.cache/nodewright/src/nodewright-go-v0.15.0)
# Env:   NODEWRIGHT_RUN, *_PORT (tests/cluster), CARGO_TARGET_DIR; PEER_MIG_KEEP=1 keeps the cluster
set -euo pipefail
SRC_DIR=${1:?usage: tests/peer/migrate.sh SRC_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=../cluster/lib.sh
. tests/cluster/lib.sh
export KUBECONFIG=$KUBECONFIG_PATH
say() { printf '[peer-migrate %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
NW=peer-mig GO_NS=skyhook OUR_NS=nodewright
NODES=(peer-mig-0 peer-mig-1 peer-mig-2)
GO_PORT=${PEER_MIG_PORT:-31440}
OUT=$NODEWRIGHT_RUN/peer-migrate
mkdir -p "$OUT"
pids=()
# shellcheck disable=SC2317  # EXIT trap
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ "${PEER_MIG_KEEP:-0}" = 1 ] || tests/cluster/down.sh >/dev/null 2>&1 || true
  exit "$rc"
}
trap cleanup EXIT

GO_BIN=$(tests/peer/build.sh "$SRC_DIR")
cargo build -q -p nodewright-shell --bin nodewright-operator --bin kubectl-nodewright
target_dir=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
OUR_BIN=$target_dir/debug/nodewright-operator
PLUGIN=$target_dir/debug/kubectl-nodewright
tests/cluster/down.sh >/dev/null 2>&1 || true   # a fresh cluster: no webhooks or objects of earlier runs
tests/cluster/up.sh >/dev/null
NODEWRIGHT_NODE_LABELS=nodewright.test/peer-mig=node tests/cluster/nodes.sh 3 peer-mig >/dev/null
for ns in $GO_NS $OUR_NS; do kc get namespace "$ns" >/dev/null 2>&1 || kc create namespace "$ns" >/dev/null; done
"$HELM_BIN/helm" template peer "$SRC_DIR/chart" --namespace "$GO_NS" \
  --show-only templates/skyhook-crd.yaml --show-only templates/deploymentpolicy-crd.yaml \
  | kc apply --server-side --force-conflicts -f - >/dev/null
for c in skyhooks.skyhook.nvidia.com deploymentpolicies.skyhook.nvidia.com; do
  kc patch crd "$c" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
done
kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
# Right after the apply a CRD may have no status yet, which kubectl wait reports as an error
# instead of waiting: retry (lib.sh wait_for) for up to 60 s.
wait_for 60 "CRDs Established" kc wait --for=condition=Established --timeout=5s crd/skyhooks.skyhook.nvidia.com crd/nodewrights.nodewright.nvidia.com || exit 1

# Every executor pod creation, for the counts (one line per ADDED event).
kc get pods -A -l skyhook.nvidia.com/name --watch --output-watch-events -o json \
  | jq --unbuffered -rc 'select(.type == "ADDED") | .object | [.spec.nodeName, (.metadata.annotations["skyhook.nvidia.com/package"] | fromjson | "\(.name) \(.stage)"), .metadata.name] | @tsv' \
  > "$OUT/go-pods.tsv" &
pids+=($!)

# --- the Go operator, mid-rollout ----------------------------------------------------------------
tests/cluster/node.sh down peer-mig-1
kc label node peer-mig-0 peer-mig-1 nodewright.test/peer-mig-selected=yes --overwrite >/dev/null
kc apply -f - >/dev/null <<EOF
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata: {name: $NW}
spec:
  nodeSelectors: {matchLabels: {nodewright.test/peer-mig-selected: "yes"}}
  packages:
    pm-a: {version: "1.0", image: example.invalid/peer/pm-a, interrupt: {type: reboot}}
    pm-b: {version: "1.0", image: example.invalid/peer/pm-b}
EOF
(
  export NAMESPACE=$GO_NS ENABLE_WEBHOOKS=false LEADER_ELECTION=false \
    METRICS_PORT=127.0.0.1:$GO_PORT PROBE_PORT=127.0.0.1:$((GO_PORT + 1))
  exec setsid "$GO_BIN" > "$OUT/go-operator.log" 2>&1 < /dev/null
) &
go_pid=$!
pids+=("$go_pid")
say "Go operator started (pid $go_pid)"
status_of() { kc get node "$1" -o json | jq -r --arg k "$2" '.metadata.annotations[$k] // ""'; }
for _ in $(seq 1 240); do
  [ "$(status_of peer-mig-0 skyhook.nvidia.com/status_peer-mig)" = complete ] && break; sleep 1
done
[ "$(status_of peer-mig-0 skyhook.nvidia.com/status_peer-mig)" = complete ] || { say "peer-mig-0 never completed"; exit 1; }
kill "$go_pid"; wait "$go_pid" 2>/dev/null || true
say "Go operator stopped with peer-mig-0 complete; legacy state:"
for n in "${NODES[@]}"; do
  printf '  %s: %s\n' "$n" "$(status_of "$n" skyhook.nvidia.com/nodeState_peer-mig)" >&2
done
kc -n "$GO_NS" get pods -l skyhook.nvidia.com/name -o wide >&2 || true

# --- migrate ---------------------------------------------------------------------------------------
"$PLUGIN" migrate | tee "$OUT/dry-run.txt"
"$PLUGIN" migrate --apply > "$OUT/apply.txt" 2>&1 &
apply_pid=$!
sleep 20
kill -0 "$apply_pid" 2>/dev/null || { cat "$OUT/apply.txt"; say "migrate --apply did not wait"; exit 1; }
tests/cluster/node.sh up peer-mig-1
wait "$apply_pid" || { cat "$OUT/apply.txt"; exit 1; }
cat "$OUT/apply.txt"
"$PLUGIN" migrate --apply | tee "$OUT/second.txt"
grep -q "Nothing to migrate" "$OUT/second.txt"

# --- our operator finishes --------------------------------------------------------------------------
kc label node peer-mig-2 nodewright.test/peer-mig-selected=yes --overwrite >/dev/null
(
  export NAMESPACE=$OUR_NS ENABLE_WEBHOOKS=false LEADER_ELECTION=false \
    METRICS_PORT=0 PROBE_PORT=127.0.0.1:$((GO_PORT + 2)) LOG_ENCODER=console
  exec setsid "$OUR_BIN" > "$OUT/our-operator.log" 2>&1 < /dev/null
) &
pids+=($!)
for _ in $(seq 1 300); do
  [ "$(kc get nodewright "$NW" -o jsonpath='{.status.status}' 2>/dev/null)" = complete ] && break; sleep 1
done
kc get nodewright "$NW" >&2

# --- counts -----------------------------------------------------------------------------------------
sleep 1
echo "Go operator executor pods created (node package stage):"
cut -f1,2 "$OUT/go-pods.tsv" | sort | uniq -c
echo "Our Jobs (node package stage):"
kc -n "$OUR_NS" get jobs -l "nodewright.nvidia.com/name=$NW" -o json \
  | jq -r '.items[].metadata.labels | "\(.["nodewright.nvidia.com/node"])\t\(.["nodewright.nvidia.com/package"]) \(.["nodewright.nvidia.com/stage"])"' \
  | sort | uniq -c
dups=$(kc -n "$OUR_NS" get jobs -l "nodewright.nvidia.com/name=$NW" -o json \
  | jq -r '.items[].metadata.labels | "\(.["nodewright.nvidia.com/node"]) \(.["nodewright.nvidia.com/package"]) \(.["nodewright.nvidia.com/stage"])"' | sort | uniq -d)
[ -z "$dups" ] || { say "duplicate Jobs: $dups"; exit 1; }
[ "$(kc get nodewright "$NW" -o jsonpath='{.status.status}')" = complete ] || { say "not complete"; exit 1; }
say "done: $NW complete under our operator"
