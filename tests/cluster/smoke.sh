#!/usr/bin/env bash
# Smoke test of the local control plane (spec 08 §9.4): brings the cluster up (build if needed),
# creates 2 kwok nodes and runs batch/v1 Jobs pinned to them by spec.template.spec.nodeName through
# the real Job controller, one per kwok pod mode (tests/cluster/kwok/pod-stages.yaml):
#   complete (+ TTL and garbage collection), fail in main (exit 3), fail in a chosen init container
#   (exit 7), fail by package label, hold until activeDeadlineSeconds, image pull failure.
#
# Usage: tests/cluster/smoke.sh [--keep]
#   If the cluster was not running, smoke.sh stops it at the end (down.sh) unless --keep is given;
#   a cluster that was already running is left running (the test's namespace and nodes are removed).
# Ends with a line "N passed, N failed"; exit status 1 when any check failed.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

keep=0
[ "${1:-}" = --keep ] && keep=1

passed=0; failed=0; failures=()
ok()   { passed=$((passed + 1)); say "PASS: $*"; }
bad()  { failed=$((failed + 1)); failures+=("$*"); say "FAIL: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

was_up=0
if pid_of kube-apiserver >/dev/null && apiserver_ready 2>/dev/null; then was_up=1; fi

start_s=$(date +%s)
"$CLUSTER_DIR/up.sh" >/dev/null
say "up.sh took $(( $(date +%s) - start_s ))s"
export KUBECONFIG=$KUBECONFIG_PATH

NS=smoke-$(date +%s)-$$
NODE_PREFIX=smoke-node
cleanup() {
  local rc=$?
  if [ "$failed" -gt 0 ] || [ $rc -ne 0 ]; then
    for l in kwok kube-controller-manager; do
      say "--- last lines of $LOGS/$l.log"; tail -n 15 "$LOGS/$l.log" >&2 || true
    done
  fi
  kc delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  if [ $was_up = 0 ] && [ $keep = 0 ]; then
    "$CLUSTER_DIR/down.sh" >/dev/null 2>&1 || true
  else
    kc delete node "$NODE_PREFIX-0" "$NODE_PREFIX-1" --wait=false >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap cleanup EXIT

# --- static checks --------------------------------------------------------------------------------
version=$(curl -fsS --cacert "$PKI/ca.crt" "https://127.0.0.1:$APISERVER_PORT/version" | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')
check "/version reports $K8S_VERSION (got $version)" [ "$version" = "$K8S_VERSION" ]
fail_modes=$(grep -o "key: '(.metadata.annotations\[\"e2e.kwok/fail\"\].*'" "$CLUSTER_DIR/kwok/pod-stages.yaml" | sort -u | wc -l)
check "FAIL_MODE jq expression identical in all pod stages" [ "$fail_modes" = 1 ]

# --- nodes ------------------------------------------------------------------------------------------
mapfile -t nodes < <("$CLUSTER_DIR/nodes.sh" 2 "$NODE_PREFIX")
check "2 kwok nodes Ready (${nodes[*]})" [ "${#nodes[@]}" = 2 ]
boots=$(kc get node "${nodes[@]}" -o jsonpath='{range .items[*]}{.status.nodeInfo.bootID}{"\n"}{end}' | grep -c .)
check "both nodes carry status.nodeInfo.bootID" [ "$boots" = 2 ]

old_boot=$(kc get node "${nodes[1]}" -o jsonpath='{.status.nodeInfo.bootID}')
new_boot=$("$CLUSTER_DIR/node.sh" reboot "${nodes[1]}" | tail -1)
if [ -n "$new_boot" ] && [ "$new_boot" != "$old_boot" ] \
   && [ "$(kc get node "${nodes[1]}" -o jsonpath='{.status.nodeInfo.bootID}')" = "$new_boot" ]; then
  ok "node.sh reboot: ${nodes[1]} back Ready with a new bootID"
else
  bad "node.sh reboot: ${nodes[1]} back Ready with a new bootID"
fi

kc create namespace "$NS" >/dev/null
wait_for 60 "ServiceAccount $NS/default" kc -n "$NS" get serviceaccount default

# --- helpers ---------------------------------------------------------------------------------------
# job NAME NODE 'annotations-yaml' 'labels-yaml' 'init-container-names' 'extra job spec yaml'
job() {
  local name=$1 node=$2 ann=$3 lab=$4 inits=$5 extra=$6 c
  {
    cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  namespace: $NS
spec:
  backoffLimit: 0
  podReplacementPolicy: Failed
$extra
  template:
    metadata:
      labels: {smoke: "true"${lab:+, $lab}}
      annotations: {smoke: "true"${ann:+, $ann}}
    spec:
      nodeName: $node
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      initContainers:
EOF
    for c in $inits; do
      printf '      - {name: %s, image: registry.invalid/nodewright/agent:0, command: ["true"]}\n' "$c"
    done
    cat <<EOF
      containers:
      - {name: done, image: registry.invalid/nodewright/pkg:0, command: ["/bin/sh", "-c", "exit 0"]}
EOF
  } | kc create -f - >/dev/null
}
job_cond() { kc -n "$NS" get job "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"; }
job_reason() { kc -n "$NS" get job "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].reason}"; }
wait_job() { wait_for "${3:-90}" "job $1 $2" bash -c "[ \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get job '$1' -o jsonpath='{.status.conditions[?(@.type==\"$2\")].status}')\" = True ]"; }
pod_of() { kc -n "$NS" get pods -l "job-name=$1" -o jsonpath="{.items[0].$2}"; }

# --- 1. success: Pending -> Running -> Succeeded; Job Complete; TTL deletes Job, GC the pod -----------
job ok-job "${nodes[0]}" "" "" "pkg-init" "  ttlSecondsAfterFinished: 5"
if wait_job ok-job Complete; then
  ok "Job ok-job Complete (real Job controller)"
  # the pod may already be gone by TTL+GC; read it right away
  r=$(pod_of ok-job 'status.initContainerStatuses[0].state.terminated.reason' 2>/dev/null || true)
  p=$(pod_of ok-job 'status.phase' 2>/dev/null || true)
  check "ok-job pod Succeeded with init container Completed (phase=$p, init=$r)" \
    bash -c "[ '$p' = Succeeded ] && [ '$r' = Completed ] || [ -z '$p' ]"
  check "ok-job and its pod removed by ttl-after-finished + garbage collector" \
    wait_for 90 "ok-job gone" bash -c "! '$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get job ok-job >/dev/null 2>&1 && [ -z \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get pods -l job-name=ok-job -o name)\" ]"
else
  bad "Job ok-job Complete"
fi

# --- 2. main container fails with exit 3 -------------------------------------------------------------
job fail-main "${nodes[1]}" '"e2e.kwok/fail": main, "e2e.kwok/exit-code": "3"' "" "pkg-init" ""
if wait_job fail-main Failed; then
  ok "Job fail-main Failed"
  check "fail-main reason BackoffLimitExceeded (got $(job_reason fail-main Failed))" [ "$(job_reason fail-main Failed)" = BackoffLimitExceeded ]
  check "fail-main pod main container exit code 3" [ "$(pod_of fail-main 'status.containerStatuses[0].state.terminated.exitCode')" = 3 ]
else
  bad "Job fail-main Failed"
fi

# --- 3. chosen init container fails with a chosen exit code (executor-shaped pod) ---------------------
job fail-init "${nodes[0]}" '"e2e.kwok/fail": init, "e2e.kwok/fail-container": demo-apply, "e2e.kwok/exit-code": "7"' "" \
  "demo-init demo-apply demo-applycheck" ""
if wait_job fail-init Failed; then
  ok "Job fail-init Failed"
  states=$(kc -n "$NS" get pods -l job-name=fail-init -o jsonpath='{range .items[0].status.initContainerStatuses[*]}{.name}={.state.terminated.exitCode}{.state.waiting.reason};{end}')
  check "fail-init: demo-init=0, demo-apply=7, demo-applycheck waiting (got $states)" \
    [ "$states" = "demo-init=0;demo-apply=7;demo-applycheck=PodInitializing;" ]
else
  bad "Job fail-init Failed"
fi

job fail-noinit "${nodes[1]}" '"e2e.kwok/fail": init, "e2e.kwok/exit-code": "5"' "" "" ""
if wait_job fail-noinit Failed; then
  check "fail-noinit: init mode without init containers fails the main container, exit 5" \
    [ "$(pod_of fail-noinit 'status.containerStatuses[0].state.terminated.exitCode')" = 5 ]
else
  bad "Job fail-noinit Failed"
fi

# --- 4. failure chosen by the operator's package/stage labels (default: 2nd init container) -----------
job fail-label "${nodes[1]}" "" '"nodewright.nvidia.com/package": e2e-fail-apply-demo-1.0.0, "nodewright.nvidia.com/stage": apply' \
  "demo-init demo-apply demo-applycheck" ""
job pass-label "${nodes[1]}" "" '"nodewright.nvidia.com/package": e2e-fail-apply-demo-1.0.0, "nodewright.nvidia.com/stage": config' \
  "demo-init demo-config demo-configcheck" ""
if wait_job fail-label Failed; then
  states=$(kc -n "$NS" get pods -l job-name=fail-label -o jsonpath='{range .items[0].status.initContainerStatuses[*]}{.name}={.state.terminated.exitCode}{.state.waiting.reason};{end}')
  check "fail-label: package e2e-fail-apply-* fails stage apply in demo-apply, exit 1 (got $states)" \
    [ "$states" = "demo-init=0;demo-apply=1;demo-applycheck=PodInitializing;" ]
else
  bad "Job fail-label Failed"
fi
check "pass-label: same package in stage config completes" wait_job pass-label Complete

# --- 5. hold until activeDeadlineSeconds: pod terminated -> Failed -> finalizer removed -> deleted -----
job hold "${nodes[0]}" '"e2e.kwok/fail": hold' "" "pkg-init" "  activeDeadlineSeconds: 5"
check "hold pod Running" \
  wait_for 30 "hold pod Running" bash -c "[ \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get pods -l job-name=hold -o jsonpath='{.items[0].status.phase}')\" = Running ]"
if wait_job hold Failed 90; then
  check "hold Job Failed with DeadlineExceeded (got $(job_reason hold Failed))" [ "$(job_reason hold Failed)" = DeadlineExceeded ]
  check "hold pod terminated and deleted" \
    wait_for 60 "hold pod gone" bash -c "[ -z \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get pods -l job-name=hold -o name)\" ]"
else
  bad "hold Job Failed (DeadlineExceeded)"
fi

# --- 6. image pull failure: pod never starts -------------------------------------------------------------
job pull "${nodes[1]}" '"e2e.kwok/fail": pull' "" "demo-init demo-apply demo-applycheck" ""
if wait_for 30 "pull pod ImagePullBackOff" bash -c "[ \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get pods -l job-name=pull -o jsonpath='{.items[0].status.initContainerStatuses[0].state.waiting.reason}')\" = ImagePullBackOff ]"; then
  sleep 3
  check "pull pod still Pending with startTime after 3s (phase $(pod_of pull status.phase))" \
    bash -c "[ '$(pod_of pull status.phase)' = Pending ] && [ -n '$(pod_of pull status.startTime)' ]"
  check "pull Job still active" [ "$(kc -n "$NS" get job pull -o jsonpath='{.status.active}')" = 1 ]
  kc -n "$NS" delete job pull --cascade=foreground --wait=false >/dev/null
  check "pull Job and pod deleted (Pending pod terminated by kwok)" \
    wait_for 60 "pull gone" bash -c "! '$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get job pull >/dev/null 2>&1 && [ -z \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' -n '$NS' get pods -l job-name=pull -o name)\" ]"
else
  bad "pull pod ImagePullBackOff"
fi

say "smoke total $(( $(date +%s) - start_s ))s"
for f in "${failures[@]}"; do say "failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
