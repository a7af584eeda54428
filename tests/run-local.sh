#!/usr/bin/env bash
# One command to see NodeWright work: starts a local Kubernetes control plane (etcd,
# kube-apiserver, kube-controller-manager, kwok — built from source and cached on first use),
# creates 3 fake nodes, installs the CRDs and URL-mode admission webhooks, runs the operator on
# this machine, applies tests/e2e/examples/demo.yaml and prints the rollout until it is complete.
# The cluster and the operator keep running afterwards.
#
# Usage: tests/run-local.sh          # bring everything up and watch the demo roll out
#        tests/run-local.sh --stop   # stop the operator and the cluster (deletes the cluster data)
# Env:   NODEWRIGHT_RUN (default /tmp/nodewright-cluster), the cluster ports of tests/cluster/lib.sh,
#        RUN_LOCAL_PROBE_PORT (18081), RUN_LOCAL_WEBHOOK_PORT (9443), RUN_LOCAL_TIMEOUT (600 s)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export NODEWRIGHT_RUN=${NODEWRIGHT_RUN:-/tmp/nodewright-cluster}
export E2E_PROBE_PORT=${RUN_LOCAL_PROBE_PORT:-18081}
export E2E_WEBHOOK_PORT=${RUN_LOCAL_WEBHOOK_PORT:-9443}
# shellcheck source=cluster/lib.sh
. tests/cluster/lib.sh   # wait_for, the cluster ports, KUBECONFIG_PATH, versions.env
say() { printf '[run-local %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "${1:-}" = --stop ]; then
  tests/e2e/operator.sh stop || true
  exec tests/cluster/down.sh
fi
for t in curl openssl base64 cargo; do command -v "$t" >/dev/null || { say "$t not found"; exit 1; }; done

# 1. control plane (the first run builds it from source: about 10 minutes on 2 cores)
up_exports=$(tests/cluster/up.sh)
eval "$up_exports"
kc() { "$K8S_BIN/kubectl" --kubeconfig="$KUBECONFIG_PATH" "$@"; }

# 2. three fake nodes, selected by the demo NodeWright
NODEWRIGHT_NODE_LABELS=demo.nodewright.test/pool=demo tests/cluster/nodes.sh 3 demo-node >/dev/null

# 3. namespace, CRDs
kc get namespace nodewright >/dev/null 2>&1 || kc create namespace nodewright >/dev/null
wait_for 60 "ServiceAccount nodewright/default" kc -n nodewright get serviceaccount default || exit 1
kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
# Right after the apply a CRD may have no status yet, which kubectl wait reports as an error
# instead of waiting: retry (lib.sh wait_for) for up to 60 s.
wait_for 60 "CRDs Established" kc wait --for=condition=Established --timeout=5s crd/nodewrights.nodewright.nvidia.com || exit 1
say "CRDs installed"

# 4. the operator, on this machine (webhooks served from the cluster's test PKI)
say "building the operator (cargo build -p nodewright-shell --bin nodewright-operator)"
cargo build -q -p nodewright-shell --bin nodewright-operator
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
mkdir -p "$NODEWRIGHT_RUN/webhook-certs"
cp "$NODEWRIGHT_RUN/pki/webhook.crt" "$NODEWRIGHT_RUN/webhook-certs/tls.crt"
cp "$NODEWRIGHT_RUN/pki/webhook.key" "$NODEWRIGHT_RUN/webhook-certs/tls.key"
cat > "$NODEWRIGHT_RUN/operator.env" <<ENV
NODEWRIGHT_OPERATOR_BIN=$target_dir/debug/nodewright-operator
KUBECONFIG=$KUBECONFIG_PATH
NAMESPACE=nodewright
LEADER_ELECTION=false
PROBE_PORT=127.0.0.1:$E2E_PROBE_PORT
METRICS_PORT=0
LOG_ENCODER=console
LOG_LEVEL=info
ENABLE_WEBHOOKS=true
WEBHOOK_PORT=$E2E_WEBHOOK_PORT
WEBHOOK_CERT_DIR=$NODEWRIGHT_RUN/webhook-certs
ENV
tests/e2e/operator.sh stop >/dev/null 2>&1 || true   # a previous run's operator: restart on the new build
tests/e2e/operator.sh start
sed -e "s/@PORT@/$E2E_WEBHOOK_PORT/g" -e "s/@CA_BUNDLE@/$(base64 -w0 < "$NODEWRIGHT_RUN/pki/ca.crt")/g" \
  tests/e2e/webhooks.yaml.in | kc apply -f - >/dev/null
say "operator running; log: $NODEWRIGHT_RUN/logs/nodewright-operator.log"

# 5. the demo NodeWright, and its progress
kc apply -f tests/e2e/examples/demo.yaml
node_line() { # node: "<node>  cordoned?  pkg=stage/state ..."
  local doc cord
  doc=$(kc get node "$1" -o jsonpath='{.metadata.annotations.nodewright\.nvidia\.com/nodeState_demo}' 2>/dev/null)
  cord=$(kc get node "$1" -o jsonpath='{.spec.unschedulable}' 2>/dev/null)
  if command -v jq >/dev/null && [ -n "$doc" ]; then
    doc=$(jq -r '[to_entries[] | "\(.value.name)=\(.value.stage)/\(.value.state)"] | join("  ")' <<<"$doc")
  fi
  printf '  %-12s %-9s %s\n' "$1" "$([ "$cord" = true ] && echo cordoned || echo -)" "${doc:-(not started)}"
}
deadline=$(( $(date +%s) + ${RUN_LOCAL_TIMEOUT:-600} ))
last=""
while :; do
  status=$(kc get nodewright demo -o jsonpath='{.status.status}' 2>/dev/null || true)
  snapshot=$(kc get nodewrights; for n in demo-node-0 demo-node-1 demo-node-2; do node_line "$n"; done)
  if [ "$snapshot" != "$last" ]; then
    printf '\n[%s]\n%s\n' "$(date +%H:%M:%S)" "$snapshot"
    last=$snapshot
  fi
  [ "$status" = complete ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    say "not complete after ${RUN_LOCAL_TIMEOUT:-600} s; see $NODEWRIGHT_RUN/logs/nodewright-operator.log"
    exit 1
  fi
  sleep 2
done
cat <<DONE

NodeWright "demo" is complete on all three nodes. Everything keeps running:
  export KUBECONFIG=$KUBECONFIG_PATH
  $K8S_BIN/kubectl get nodewrights,jobs -A        # Jobs: one per package, stage and node
  tail -f $NODEWRIGHT_RUN/logs/nodewright-operator.log
Stop the operator and the cluster:   tests/run-local.sh --stop
  (or: tests/e2e/operator.sh stop with NODEWRIGHT_RUN=$NODEWRIGHT_RUN, then tests/cluster/down.sh)
DONE
if [ "$NODEWRIGHT_RUN" != /tmp/nodewright-cluster ] || [ -n "${APISERVER_PORT:-}" ]; then
  echo "  (set the same NODEWRIGHT_RUN and *_PORT variables as for this run)"
fi
