#!/usr/bin/env bash
# End-to-end driver: a private local control plane (tests/cluster, own ports and run directory,
# see env.sh), kwok nodes, the CRDs, URL-mode webhooks and the operator binary as a host process,
# then the Rust e2e suite (tests/tests/e2e.rs):
#   cargo test -p nodewright-tests --test e2e -- --ignored --test-threads=1
# Everything it started is stopped from an EXIT trap, by pid.
#
# Usage: tests/e2e/run.sh [test-name-filter...]
# Env:   NODEWRIGHT_E2E_KEEP=1      leave cluster and operator running afterwards
#        NODEWRIGHT_E2E_REUSE=1     keep the etcd data of a previous run (default: fresh cluster)
#        NODEWRIGHT_E2E_PENDING=1   also run tests marked #[ignore = "pending: ..."]
#        NODEWRIGHT_E2E_WEBHOOKS=0  do not serve/register the admission webhooks
#        NODEWRIGHT_E2E_REPLAY=0    do not record operator traces nor replay them after the suite
#        NODEWRIGHT_RUN, *_PORT, E2E_PROBE_PORT, E2E_WEBHOOK_PORT (env.sh)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/env.sh"
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"   # wait_for (and versions.env); env.sh's ports and run dir win
cd "$ROOT"
started=$(date +%s)
CLUSTER=$ROOT/tests/cluster
RESULTS=$NODEWRIGHT_RUN/e2e-results.txt
TRACE_DIR=$NODEWRIGHT_RUN/traces        # one NODEWRIGHT_TRACE file per operator process
WINDOWS=$NODEWRIGHT_RUN/e2e-windows.txt  # <test> <start> <end>, written by the harness
# kubelet emulation for pod-level activeDeadlineSeconds, on top of the cluster's own stages
# and fake container logs read from $POD_LOGS (kwok/pod-logs.yaml.in; the tests write the files)
POD_LOGS=$NODEWRIGHT_RUN/pod-logs
mkdir -p "$POD_LOGS"
sed "s|@DIR@|$POD_LOGS|g" "$E2E_DIR/kwok/pod-logs.yaml.in" > "$NODEWRIGHT_RUN/kwok-pod-logs.yaml"
export NODEWRIGHT_KWOK_CONFIG="$E2E_DIR/kwok/pod-deadline.yaml $NODEWRIGHT_RUN/kwok-pod-logs.yaml${NODEWRIGHT_KWOK_CONFIG:+ $NODEWRIGHT_KWOK_CONFIG}"

# Operator options for the run; the tests read them back as NODEWRIGHT_E2E_<NAME>.
JOB_BACKOFF_LIMIT=${JOB_BACKOFF_LIMIT:-1}   # A3/A16: 2 attempts (10 s of Job backoff) instead of 4 (70 s)
REAPPLY_ON_REBOOT=true                      # R5; no other test changes a boot id

kc() { "$K8S_BIN/kubectl" --kubeconfig="$KUBECONFIG" "$@"; }

phase_start=$started
phase() { local now; now=$(date +%s); e2e_say "$1 ($((now - phase_start)) s)"; phase_start=$now; }

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ]; then
    e2e_say "FAILED (exit $rc); log tails:"
    for f in "$NODEWRIGHT_RUN"/logs/{kube-apiserver,kube-controller-manager,kwok}.log "$OPERATOR_LOG"; do
      [ -f "$f" ] || continue
      n=15; [ "$f" = "$OPERATOR_LOG" ] && n=60
      printf '\n----- %s (last %s lines, cut at 300 columns) -----\n' "$f" "$n" >&2
      tail -n "$n" "$f" | cut -c1-300 >&2
    done
    e2e_say "suite output: $NODEWRIGHT_RUN/e2e-output.txt; failing cases print their NodeWright/Job/node dump there"
  fi
  if [ "${NODEWRIGHT_E2E_KEEP:-0}" = 1 ]; then
    e2e_say "leaving cluster and operator running (KUBECONFIG=$KUBECONFIG); stop with:"
    e2e_say "  tests/e2e/operator.sh stop; NODEWRIGHT_RUN=$NODEWRIGHT_RUN ETCD_PORT=$ETCD_PORT ETCD_PEER_PORT=$ETCD_PEER_PORT APISERVER_PORT=$APISERVER_PORT KCM_PORT=$KCM_PORT KWOK_PORT=$KWOK_PORT tests/cluster/down.sh"
  else
    "$E2E_DIR/operator.sh" stop >/dev/null 2>&1
    "$CLUSTER/down.sh" >/dev/null 2>&1
  fi
  e2e_say "total $(( $(date +%s) - started )) s"
  exit "$rc"
}
trap cleanup EXIT

# --- 1. control plane (cached build, fresh etcd unless REUSE) -------------------------------------
# shellcheck source=tests/cluster/versions.env
. "$CLUSTER/versions.env"
"$CLUSTER/build.sh" core >&2
phase "binaries ready"
if [ "${NODEWRIGHT_E2E_REUSE:-0}" != 1 ]; then
  "$E2E_DIR/operator.sh" stop >/dev/null 2>&1 || true
  "$CLUSTER/down.sh" >/dev/null 2>&1
fi
# kwok must run with the e2e stage file: restart it if an earlier up.sh started it without.
if [ -f "$NODEWRIGHT_RUN/pids/kwok.pid" ] && ! tr '\0' ' ' < "/proc/$(cat "$NODEWRIGHT_RUN/pids/kwok.pid")/cmdline" 2>/dev/null | grep -q kwok-pod-logs.yaml; then
  kill "$(cat "$NODEWRIGHT_RUN/pids/kwok.pid")" 2>/dev/null || true
  sleep 1
fi
"$CLUSTER/up.sh" > /dev/null
phase "control plane up on https://127.0.0.1:$APISERVER_PORT"
"$CLUSTER/nodes.sh" 2 e2e-idle > /dev/null   # nodes no test selects: the operator must ignore them
phase "kwok nodes ready"

# --- 2. namespace, CRDs, webhooks ---------------------------------------------------------------
kc get namespace nodewright >/dev/null 2>&1 || kc create namespace nodewright >/dev/null
wait_for 60 "ServiceAccount nodewright/default" kc -n nodewright get serviceaccount default || exit 1
kc apply --server-side --force-conflicts -f chart/files/crds/ >/dev/null
# Right after the apply a CRD may have no status yet, which kubectl wait reports as an error
# instead of waiting: retry (lib.sh wait_for) for up to 60 s.
wait_for 60 "CRDs Established" kc wait --for=condition=Established --timeout=5s \
  crd/nodewrights.nodewright.nvidia.com crd/deploymentpolicies.nodewright.nvidia.com || exit 1
phase "namespace and CRDs installed"

# --- 3. operator -------------------------------------------------------------------------------
cargo build -q -p nodewright-shell --bin nodewright-operator --bin kubectl-nodewright
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
OPERATOR_BIN=$target_dir/debug/nodewright-operator
[ -x "$OPERATOR_BIN" ] || { e2e_say "operator binary not found at $OPERATOR_BIN"; exit 1; }
phase "operator built"

webhooks=${NODEWRIGHT_E2E_WEBHOOKS:-auto}
if [ "$webhooks" = auto ]; then
  # The operator's local switch: serve tls.crt/tls.key from WEBHOOK_CERT_DIR on WEBHOOK_PORT, no
  # self-managed certificate Secret and no CA injection (docs/operations.md).
  if grep -rqs WEBHOOK_CERT_DIR shell/src; then webhooks=1; else webhooks=0; fi
fi
{
  printf 'NODEWRIGHT_OPERATOR_BIN=%q\n' "$OPERATOR_BIN"
  printf 'KUBECONFIG=%q\n' "$KUBECONFIG"
  echo "NAMESPACE=nodewright"
  echo "LEADER_ELECTION=false"
  echo "PROBE_PORT=127.0.0.1:$E2E_PROBE_PORT"
  echo "METRICS_PORT=127.0.0.1:$E2E_METRICS_PORT"
  echo "LOG_ENCODER=console"
  echo "LOG_LEVEL=${LOG_LEVEL:-info}"
  echo "JOB_BACKOFF_LIMIT=$JOB_BACKOFF_LIMIT"
  echo "REAPPLY_ON_REBOOT=$REAPPLY_ON_REBOOT"
  if [ "${NODEWRIGHT_E2E_REPLAY:-1}" != 0 ]; then printf 'E2E_TRACE_DIR=%q\n' "$TRACE_DIR"; fi
  if [ "$webhooks" = 1 ]; then
    echo "ENABLE_WEBHOOKS=true"
    echo "WEBHOOK_PORT=$E2E_WEBHOOK_PORT"
    printf 'WEBHOOK_CERT_DIR=%q\n' "$NODEWRIGHT_RUN/webhook-certs"
  else
    echo "ENABLE_WEBHOOKS=false"
  fi
} > "$OPERATOR_ENV"
: > "$OPERATOR_LOG"
rm -rf "$TRACE_DIR" "$WINDOWS"
if [ "$webhooks" = 1 ]; then
  # the cluster PKI's serving cert (SAN 127.0.0.1, signed by pki/ca.crt) under the names the operator reads
  mkdir -p "$NODEWRIGHT_RUN/webhook-certs"
  cp "$NODEWRIGHT_RUN/pki/webhook.crt" "$NODEWRIGHT_RUN/webhook-certs/tls.crt"
  cp "$NODEWRIGHT_RUN/pki/webhook.key" "$NODEWRIGHT_RUN/webhook-certs/tls.key"
fi
"$E2E_DIR/operator.sh" start
if [ "$webhooks" = 1 ]; then
  sed -e "s/@PORT@/$E2E_WEBHOOK_PORT/g" -e "s/@CA_BUNDLE@/$(base64 -w0 < "$NODEWRIGHT_RUN/pki/ca.crt")/g" \
    "$E2E_DIR/webhooks.yaml.in" | kc apply -f - >/dev/null
fi
phase "operator running (webhooks: $([ "$webhooks" = 1 ] && echo "URL mode on 127.0.0.1:$E2E_WEBHOOK_PORT" || echo off))"

# --- 4. the suite --------------------------------------------------------------------------------
# Pending tests: #[ignore = "pending: ..."] directly above the test fn.
# Printed as <module>::<fn>, the form cargo test reports.
pending=$(awk '/#\[ignore = "pending:/ {p=1; next} p && /fn [a-z0-9_]+/ {m=FILENAME; sub(/.*\//, "", m); sub(/\.rs$/, "", m); sub(/.*fn /, ""); sub(/\(.*/, ""); print m "::" $0; p=0}' tests/tests/e2e/*.rs)
skips=()
if [ "${NODEWRIGHT_E2E_PENDING:-0}" != 1 ]; then
  for t in $pending; do skips+=(--skip "$t"); done
fi
if [ "$webhooks" != 1 ]; then skips+=(--skip webhook_); fi
export NODEWRIGHT_E2E_NAMESPACE=nodewright
export NODEWRIGHT_E2E_JOB_BACKOFF_LIMIT=$JOB_BACKOFF_LIMIT
export NODEWRIGHT_E2E_REAPPLY_ON_REBOOT=1
export NODEWRIGHT_E2E_OPERATOR_CTL=$E2E_DIR/operator.sh
export NODEWRIGHT_E2E_OPERATOR_BIN=$OPERATOR_BIN
export NODEWRIGHT_E2E_CLI_BIN=$target_dir/debug/kubectl-nodewright
export NODEWRIGHT_E2E_KUBECTL=$K8S_BIN/kubectl
export NODEWRIGHT_E2E_METRICS_URL=http://127.0.0.1:$E2E_METRICS_PORT/metrics
export NODEWRIGHT_E2E_PKI=$NODEWRIGHT_RUN/pki
export NODEWRIGHT_E2E_POD_LOGS=$POD_LOGS
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
export NODEWRIGHT_E2E_WINDOWS=$WINDOWS
set +e
cargo test -p nodewright-tests --test e2e -- --ignored --test-threads=1 "${skips[@]}" "$@" 2>&1 | tee "$NODEWRIGHT_RUN/e2e-output.txt"
rc=${PIPESTATUS[0]}
set -e
phase "suite finished (exit $rc)"

# --- 4b. replay every operator trace with this commit's simulator: 0 differing effects -----------
if [ "${NODEWRIGHT_E2E_REPLAY:-1}" != 0 ]; then
  cargo build -q -p nodewright-sim --bin nodewright-sim
  mapfile -t traces < <(find "$TRACE_DIR" -name 'operator-*.jsonl' 2>/dev/null | sort)
  if [ "${#traces[@]}" = 0 ]; then
    e2e_say "replay: no trace was recorded"; rc=1
  elif "$target_dir/debug/nodewright-sim" replay --show 5 --windows "$WINDOWS" "${traces[@]}" > "$NODEWRIGHT_RUN/replay.txt" 2>&1; then
    cat "$NODEWRIGHT_RUN/replay.txt"
    phase "replay: ${#traces[@]} trace(s), 0 differing effects"
  else
    cat "$NODEWRIGHT_RUN/replay.txt"
    e2e_say "replay FAILED: the core decides differently on the recorded snapshots; traces kept in $TRACE_DIR"
    rc=1
  fi
fi

# --- 5. results table ------------------------------------------------------------------------------
{
  grep -E '^test [a-z0-9_:]+ \.\.\. ' "$NODEWRIGHT_RUN/e2e-output.txt" | sed -E 's/^test ([^ ]+) \.\.\. (.*)$/\1 \2/' \
    | awk '{r=$2; if (r=="ok") r="pass"; else if (r=="FAILED") r="FAIL"; print $1, r}'
  for t in $pending; do echo "$t pending"; done
  if [ "$webhooks" != 1 ]; then grep -ho 'fn webhook_[a-z0-9_]*' tests/tests/e2e/*.rs | sed 's/fn \(.*\)/\1 skipped(no-webhooks)/'; fi
} | sort -u > "$RESULTS"
e2e_say "results ($RESULTS):"
column -t "$RESULTS" >&2 || cat "$RESULTS" >&2
exit "$rc"
