#!/usr/bin/env bash
# The chart's whole life on a private local control plane (tests/cluster), the way users run it:
#   1. helm install of the PREVIOUS chart version (a copy of chart/ whose NodeWright CRD lacks one
#      field), webhooks in URL mode (the apiserver cannot reach a Service here), HTTPS metrics;
#   2. the operator as two host processes (kwok does not run the Deployment's pods) with the
#      chart's ServiceAccount credentials (a TokenRequest token in a kubeconfig) and the
#      Deployment's environment: the webhook certificate bootstrap for real (mint, Secret,
#      caBundle, both replicas serving one certificate), rotation with a 90 s validity while
#      admission requests run (counted), a rollout with an interrupt and a drain;
#   3. /metrics: no token 401, a token without the metrics-reader role 403, with it 200;
#   4. helm upgrade to this chart (the CRD gains the field, a changed value reaches the
#      Deployment), helm rollback (admission still works), helm uninstall (the post-delete hook's
#      command runs on the host with the hook's ServiceAccount; no finalizer or webhook left);
#   5. RBAC against the apiserver's audit log (tests/helm/rbac-audit.sh) for both identities.
# Prints the helm commands' timings. Everything it started is stopped from an EXIT trap, by pid.
#
# Usage: tests/helm/lifecycle.sh
# Env:   NODEWRIGHT_HELM_KEEP=1 leave the cluster running; NODEWRIGHT_RUN, *_PORT as tests/cluster,
#        HELM_LC_PORT_BASE (default 18100): replica ports base..base+13.
set -euo pipefail
HELM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HELM_DIR/../.." && pwd)
: "${NODEWRIGHT_RUN:=/tmp/nodewright-helm-lifecycle}"
: "${ETCD_PORT:=26790}" "${ETCD_PEER_PORT:=26800}" "${APISERVER_PORT:=26443}" "${KCM_PORT:=13257}" "${KWOK_PORT:=13247}"
: "${HELM_LC_PORT_BASE:=18100}"
export NODEWRIGHT_RUN ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT KWOK_PORT
export NODEWRIGHT_AUDIT_POLICY=$HELM_DIR/audit-policy.yaml
# shellcheck source=../cluster/versions.env
. "$ROOT/tests/cluster/versions.env"
CLUSTER=$ROOT/tests/cluster
export KUBECONFIG=$NODEWRIGHT_RUN/kubeconfig
KUBECTL=$K8S_BIN/kubectl HELM=$HELM_BIN/helm
REL=nodewright NS=nodewright
SA=nodewright-controller-manager HOOK_SA=nodewright-cleanup
WORK=$NODEWRIGHT_RUN/helm-lifecycle
AUDIT=$NODEWRIGHT_RUN/logs/audit.log
WH_PORT=$((HELM_LC_PORT_BASE + 1))           # replica a's webhook port: the URL the apiserver dials
started=$(date +%s)
TIMINGS=()
PIDS=()

say() { printf '[helm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }
kc() { "$KUBECTL" "$@"; }

timed() { # label command...: runs it and records the wall time
  local label=$1 t0 t1; shift
  t0=$(date +%s%N)
  "$@"
  t1=$(date +%s%N)
  TIMINGS+=("$(awk -v l="$label" -v d=$((t1 - t0)) 'BEGIN {printf "%-34s %6.2f s", l, d / 1e9}')")
}

wait_until() { # seconds description command...
  local secs=$1 what=$2 i; shift 2
  for ((i = 0; i < secs * 2; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  die "timed out after ${secs}s: $what"
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$? p
  set +e
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  stop_replicas
  if [ "$rc" != 0 ]; then
    for f in "$WORK"/replica-*.log; do [ -f "$f" ] && { echo "----- $f" >&2; tail -n 25 "$f" | cut -c1-300 >&2; }; done
  fi
  if [ ${#TIMINGS[@]} -gt 0 ]; then
    say "helm timings:"; printf '  %s\n' "${TIMINGS[@]}" >&2
  fi
  if [ "${NODEWRIGHT_HELM_KEEP:-0}" != 1 ]; then "$CLUSTER/down.sh" >/dev/null 2>&1; fi
  say "total $(( $(date +%s) - started )) s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT

# --- cluster, binaries ---------------------------------------------------------------------------
"$CLUSTER/build.sh" core helm >&2
cd "$ROOT"
cargo build -q -p nodewright-shell --bin nodewright-operator
target_dir=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
OPERATOR_BIN=$target_dir/debug/nodewright-operator
"$CLUSTER/down.sh" --purge >/dev/null 2>&1 || true   # fresh PKI, etcd and audit log
"$CLUSTER/up.sh" >/dev/null
mkdir -p "$WORK"
NODEWRIGHT_NODE_LABELS=helm.nodewright.test/pool=lc "$CLUSTER/nodes.sh" 2 helm-lc >/dev/null
say "control plane up on :$APISERVER_PORT with the audit log $AUDIT"

# --- 1. install the previous chart version ---------------------------------------------------------
# The previous version: this chart with version 0.0.1 and the NodeWright CRD without
# spec.additionalTolerations, the field this version "adds".
PREV=$WORK/chart-prev
rm -rf "$PREV"; cp -r chart "$PREV"
sed -i 's/^version: .*/version: 0.0.1/' "$PREV/Chart.yaml"
crd_file=$(grep -l 'name: nodewrights.nodewright.nvidia.com' -r "$PREV" | head -n1)
[ -n "$crd_file" ] || die "no NodeWright CRD in the chart"
# drop the additionalTolerations property (its line and every deeper-indented line after it)
awk '
  skip && (match($0, /^ */) && RLENGTH > indent || $0 ~ /^ *$/) { next }
  { skip = 0 }
  /^ *additionalTolerations:$/ { match($0, /^ */); indent = RLENGTH; skip = 1; next }
  { print }' "$crd_file" > "$crd_file.new"
mv "$crd_file.new" "$crd_file"
grep -q additionalTolerations "$crd_file" && die "the previous CRD still has additionalTolerations"

VALUES=(
  --set "webhook.url=https://127.0.0.1:$WH_PORT"
  --set webhook.certValidity=90s --set webhook.certRotateBefore=60s
  --set controllerManager.manager.env.metricsSecure=true
  --set controllerManager.manager.env.logLevel=info
)
timed "helm install (0.0.1)" "$HELM" install "$REL" "$PREV" -n "$NS" --create-namespace "${VALUES[@]}" >/dev/null
crd_has_field() {
  kc get crd nodewrights.nodewright.nvidia.com -o json \
    | jq -e '.spec.versions[] | select(.name == "v1alpha1") | .schema.openAPIV3Schema.properties.spec.properties | has("additionalTolerations")'
}
! crd_has_field >/dev/null 2>&1 || die "the previous CRD was installed with additionalTolerations"
say "installed the previous chart version"

# --- 2. the operator with the chart's ServiceAccount -------------------------------------------------
sa_kubeconfig() { # serviceaccount file
  local token ca
  token=$(kc -n "$NS" create token "$1" --duration=2h)
  ca=$(base64 -w0 < "$NODEWRIGHT_RUN/pki/ca.crt")
  cat > "$2" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority-data: $ca}}]
users: [{name: $1, user: {token: $token}}]
contexts: [{name: $1, context: {cluster: local, user: $1, namespace: $NS}}]
current-context: $1
EOF
  chmod 600 "$2"
}
sa_kubeconfig "$SA" "$WORK/operator.kubeconfig"

deployment_env() { # the operator container's env as NAME=VALUE lines (fieldRefs resolved)
  kc -n "$NS" get deployment -l app.kubernetes.io/instance="$REL" -o json | jq -r --arg ns "$NS" '
    .items[0].spec.template.spec.containers[] | select(.name == "manager") | .env[]
    | if .value != null then "\(.name)=\(.value)"
      elif .valueFrom.fieldRef.fieldPath == "metadata.namespace" then "\(.name)=\($ns)"
      else empty end'
}

REPLICA_PIDS=()
start_replicas() {
  local r base envfile
  deployment_env > "$WORK/deployment.env"
  [ -s "$WORK/deployment.env" ] || die "no env in the Deployment"
  for r in a b; do
    base=$HELM_LC_PORT_BASE; [ $r = b ] && base=$((HELM_LC_PORT_BASE + 10))
    envfile=$WORK/replica-$r.env
    { cat "$WORK/deployment.env"
      echo "POD_NAME=nodewright-operator-$r"
      echo "WEBHOOK_PORT=$((base + 1))"
      echo "PROBE_PORT=127.0.0.1:$((base + 2))"
      echo "METRICS_PORT=127.0.0.1:$((base + 3))"
      echo "LOG_ENCODER=console"
      echo "KUBECONFIG=$WORK/operator.kubeconfig"
    } > "$envfile"
    ( set -a; . "$envfile"; set +a; exec setsid env -u NODEWRIGHT_AUDIT_POLICY "$OPERATOR_BIN" >> "$WORK/replica-$r.log" 2>&1 < /dev/null ) &
    REPLICA_PIDS+=($!)
  done
  for r in a b; do
    base=$HELM_LC_PORT_BASE; [ $r = b ] && base=$((HELM_LC_PORT_BASE + 10))
    wait_until 120 "replica $r ready" sh -c "[ \"\$(curl -fsS --max-time 2 http://127.0.0.1:$((base + 2))/readyz)\" = ok ]"
  done
  say "replicas ready (pids ${REPLICA_PIDS[*]})"
}
stop_replicas() {
  local p
  for p in "${REPLICA_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${REPLICA_PIDS[@]}"; do
    for _ in $(seq 1 40); do [ -d "/proc/$p" ] || break; sleep 0.25; done
    kill -KILL "$p" 2>/dev/null || true
  done
  REPLICA_PIDS=()
}
start_replicas

served_cert() { # port -> sha256 fingerprint of the served certificate
  openssl s_client -connect "127.0.0.1:$1" -servername 127.0.0.1 </dev/null 2>/dev/null \
    | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2
}
secret_cert() {
  kc -n "$NS" get secret webhook-cert -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2
}
bundle_matches_secret() {
  local ca v m
  ca=$(kc -n "$NS" get secret webhook-cert -o jsonpath='{.data.ca\.crt}')
  v=$(kc get validatingwebhookconfigurations -l nodewright.nvidia.com/webhook-config=true -o json | jq -r '[.items[].webhooks[].clientConfig.caBundle] | unique | join(",")')
  m=$(kc get mutatingwebhookconfigurations -l nodewright.nvidia.com/webhook-config=true -o json | jq -r '[.items[].webhooks[].clientConfig.caBundle] | unique | join(",")')
  [ "$v" = "$ca" ] && [ "$m" = "$ca" ]
}
wait_until 60 "the caBundle equals the Secret's ca.crt" bundle_matches_secret
first=$(secret_cert)
wait_until 60 "both replicas serve the Secret's certificate" \
  sh -c "[ \"\$(openssl s_client -connect 127.0.0.1:$WH_PORT </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)\" = '$first' ] && [ \"\$(openssl s_client -connect 127.0.0.1:$((HELM_LC_PORT_BASE + 11)) </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)\" = '$first' ]"
say "certificate bootstrap: Secret minted, caBundle injected, both replicas serve $first"

# The admission probe names this policy, so the NodeWright webhook reads it with the operator's
# identity (get deploymentpolicies).
kc create -f - >/dev/null <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: DeploymentPolicy
metadata: {name: lc-policy}
spec:
  default:
    budget: {count: 1}
    strategy: {fixed: {initialBatch: 1}}
EOF

# Admission traffic through the rotation: a server-side dry-run create of a NodeWright every 0.5 s
# (mutating + validating webhooks), counted as ok/failed.
admission_loop() {
  local ok=0 failed=0
  while [ ! -f "$WORK/admission.stop" ]; do
    if kc create --dry-run=server -f - >/dev/null 2>>"$WORK/admission.err" <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata: {name: admission-probe}
spec:
  nodeSelectors: {matchLabels: {helm.nodewright.test/none: "x"}}
  deploymentPolicy: lc-policy
  packages: {probe: {version: 1.0.0, image: example.invalid/probe}}
EOF
    then ok=$((ok + 1)); else failed=$((failed + 1)); fi
    echo "$ok $failed" > "$WORK/admission.count"
    sleep 0.5
  done
}
rm -f "$WORK/admission.stop" "$WORK/admission.err"
admission_loop &
PIDS+=($!)

# Rollout: a package with an interrupt on both nodes (budget 1) and a workload pod on the first
# node that the drain must evict.
kc create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: lc-workload, namespace: default}
spec:
  nodeName: helm-lc-0
  containers: [{name: main, image: example.invalid/workload}]
EOF
kc create -f - >/dev/null <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata: {name: lc}
spec:
  nodeSelectors: {matchLabels: {helm.nodewright.test/pool: lc}}
  interruptionBudget: {count: 1}
  packages:
    tuning: {version: 1.0.0, image: example.invalid/tuning}
    driver:
      version: 2.1.0
      image: example.invalid/driver
      dependsOn: {tuning: 1.0.0}
      interrupt: {type: service, services: [containerd]}
EOF
nw_status() { kc get nodewright "$1" -o jsonpath='{.status.status}'; }
wait_until 180 "NodeWright lc complete" sh -c "[ \"\$($KUBECTL get nodewright lc -o jsonpath='{.status.status}')\" = complete ]"
kc -n default get pod lc-workload >/dev/null 2>&1 && die "the workload pod was not drained"
say "rollout with interrupt and drain complete"

# The user guide's first NodeWright, as written in docs/user-guide.md "Install". It selects
# example.com/pool=gpu, which no node here carries, so it completes at once with no work.
kc apply -f crds/examples/simple.yaml >/dev/null
kc get nodewrights
wait_until 60 "the user guide's NodeWright simple complete" sh -c "[ \"\$($KUBECTL get nodewright simple -o jsonpath='{.status.status}')\" = complete ]"

# Rotation: the certificate lives 90 s and is re-minted 60 s before expiry.
wait_until 150 "a rotated certificate served by both replicas" sh -c "
  s=\$($KUBECTL -n $NS get secret webhook-cert -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)
  [ \"\$s\" != '$first' ] || exit 1
  for p in $WH_PORT $((HELM_LC_PORT_BASE + 11)); do
    [ \"\$(openssl s_client -connect 127.0.0.1:\$p </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | cut -d= -f2)\" = \"\$s\" ] || exit 1
  done"
sleep 5   # admission traffic right after the switch
touch "$WORK/admission.stop"; wait "${PIDS[0]}" || true; PIDS=()
read -r adm_ok adm_failed < "$WORK/admission.count"
rotations=$(grep -c 're-minting webhook certificate' "$WORK"/replica-*.log | awk -F: '{s+=$2} END {print s+0}')
say "rotation: $rotations re-mint(s) logged; admission across it: $adm_ok ok, $adm_failed failed"
[ "$adm_failed" = 0 ] || { cat "$WORK/admission.err" >&2; die "$adm_failed admission requests failed across the rotation"; }
[ "$adm_ok" -gt 10 ] || die "too few admission requests ($adm_ok)"

# --- 3. authenticated metrics ----------------------------------------------------------------------
METRICS=https://127.0.0.1:$((HELM_LC_PORT_BASE + 3))/metrics
kc -n "$NS" create serviceaccount lc-nobody >/dev/null
kc -n "$NS" create serviceaccount lc-scraper >/dev/null
reader=$(kc get clusterrole -l app.kubernetes.io/instance="$REL" -o name | grep metrics-reader) || die "no metrics-reader ClusterRole"
kc create clusterrolebinding lc-scraper --clusterrole="${reader#*/}" --serviceaccount="$NS:lc-scraper" >/dev/null
code() { curl -sk -o "$WORK/metrics.body" -w '%{http_code}' "$@" "$METRICS"; }
m_none=$(code)
m_nobody=$(code -H "Authorization: Bearer $(kc -n "$NS" create token lc-nobody)")
m_reader=$(code -H "Authorization: Bearer $(kc -n "$NS" create token lc-scraper)")
families=$(grep -c '^# TYPE nodewright_' "$WORK/metrics.body" || true)
say "metrics: no token $m_none, token without the role $m_nobody, metrics-reader $m_reader ($families nodewright_ families)"
[ "$m_none" = 401 ] && [ "$m_nobody" = 403 ] && [ "$m_reader" = 200 ] && [ "$families" -gt 0 ] || die "metrics authentication"
plain=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((HELM_LC_PORT_BASE + 2))/healthz")
[ "$plain" = 200 ] || die "probes are not plain HTTP ($plain)"

admission_ok() { kc create --dry-run=server -f - <<EOF
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata: {name: admission-probe}
spec:
  nodeSelectors: {matchLabels: {helm.nodewright.test/none: "x"}}
  deploymentPolicy: lc-policy
  packages: {probe: {version: 1.0.0, image: example.invalid/probe}}
EOF
}

# --- 4. upgrade, rollback ----------------------------------------------------------------------------
timed "helm upgrade (0.0.1 -> chart/)" "$HELM" upgrade "$REL" chart -n "$NS" "${VALUES[@]}" \
  --set controllerManager.manager.env.logLevel=debug >/dev/null
crd_has_field >/dev/null || die "helm upgrade did not update the NodeWright CRD"
deployment_env | grep -qx 'LOG_LEVEL=debug' || die "the changed value did not reach the Deployment"
stop_replicas; start_replicas   # the rolling update
wait_until 60 "admission after the upgrade" admission_ok
say "upgrade: CRD has additionalTolerations, LOG_LEVEL=debug in the Deployment, admission works"

timed "helm rollback (to revision 1)" "$HELM" rollback "$REL" 1 -n "$NS" >/dev/null
deployment_env | grep -qx 'LOG_LEVEL=info' || die "rollback did not restore the Deployment"
bundle_matches_secret || say "rollback reset the caBundle; the operator re-injects it"
stop_replicas; start_replicas
wait_until 60 "admission after the rollback (webhook not wedged)" admission_ok
# the rollback re-applies revision 1's CRD schema (without the field); the CRD and its objects stay
kc get nodewright lc >/dev/null || die "the rollback lost NodeWright lc (CRDs must be kept)"
say "rollback: LOG_LEVEL=info, admission works, CRD and NodeWrights kept (schema of revision 1: field served: $(crd_has_field 2>/dev/null || true))"

# --- 5. RBAC of the operator against the audit log -----------------------------------------------------
stop_replicas
rbac_json() {
  kc get clusterroles,roles,clusterrolebindings,rolebindings -A -l app.kubernetes.io/instance="$REL" -o json > "$1"
}
rbac_json "$WORK/rbac.json"
kc api-resources --namespaced=true -o name | awk -F. '{ if (NF == 1) print "core/" $1; else { r=$1; sub(/^[^.]*\./, ""); print $0 "/" r } }' > "$WORK/namespaced.txt"
# subresources inherit their resource's scope
awk -F/ '{print $1 "/" $2 "/eviction"; print $1 "/" $2 "/status"; print $1 "/" $2 "/log"; print $1 "/" $2 "/binding"}' "$WORK/namespaced.txt" >> "$WORK/namespaced.txt"
say "RBAC of $SA (audit log vs grants):"
"$HELM_DIR/rbac-audit.sh" "$AUDIT" "$WORK/rbac.json" "$NS" "$SA" "$WORK/namespaced.txt" "$HELM_DIR/rbac-waivers.txt" >&2 \
  || die "the operator's RBAC is not minimal (see the table)"

# --- 6. uninstall -------------------------------------------------------------------------------------
kc get nodewright lc -o jsonpath='{.metadata.finalizers}' | grep -q nodewright.nvidia.com/nodewright \
  || die "NodeWright lc has no finalizer before the uninstall"
t0=$(date +%s%N)
"$HELM" uninstall "$REL" -n "$NS" --timeout 3m > "$WORK/uninstall.out" 2>&1 &
uninstall_pid=$!
PIDS+=("$uninstall_pid")
hook_pod() { kc -n "$NS" get pods -l app.kubernetes.io/component=cleanup -o jsonpath='{.items[0].metadata.name}'; }
wait_until 60 "the cleanup hook's pod" sh -c "[ -n \"\$($KUBECTL -n $NS get pods -l app.kubernetes.io/component=cleanup -o jsonpath='{.items[0].metadata.name}')\" ]"
kc -n "$NS" get deployment -l app.kubernetes.io/instance="$REL" -o name | grep -q . && die "the Deployment still exists when the post-delete hook runs"
# the hook's roles exist only while it runs (hook-delete-policy): keep them for the RBAC check
kc get clusterroles,roles,clusterrolebindings,rolebindings -A -l app.kubernetes.io/component=cleanup -o json > "$WORK/hook-rbac.json"
# kwok does not run the hook's pod: run its command on the host as the hook's ServiceAccount, then
# bind the pod to a kwok node (we are the scheduler) so kwok completes it and helm goes on.
sa_kubeconfig "$HOOK_SA" "$WORK/hook.kubeconfig"
hook_cmd=$(kc -n "$NS" get pod "$(hook_pod)" -o json | jq -r '.spec.containers[0] | (.command // []) + (.args // []) | .[1:] | join(" ")')
hook_env=$(kc -n "$NS" get pod "$(hook_pod)" -o json | jq -r --arg ns "$NS" '.spec.containers[0].env[]? | if .value != null then "\(.name)=\(.value)" elif .valueFrom.fieldRef.fieldPath == "metadata.namespace" then "\(.name)=\($ns)" else empty end')
say "running the hook's command on the host: nodewright-operator $hook_cmd"
# shellcheck disable=SC2086  # the hook's arguments
env $hook_env KUBECONFIG="$WORK/hook.kubeconfig" "$OPERATOR_BIN" $hook_cmd >&2
kc -n "$NS" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Binding
metadata: {name: $(hook_pod)}
target: {apiVersion: v1, kind: Node, name: helm-lc-1}
EOF
wait "$uninstall_pid" || { cat "$WORK/uninstall.out" >&2; die "helm uninstall failed"; }
PIDS=()
t1=$(date +%s%N)
TIMINGS+=("$(awk -v d=$((t1 - t0)) 'BEGIN {printf "%-34s %6.2f s", "helm uninstall (with the hook)", d / 1e9}')")
left=$(kc get nodewrights -o json | jq -r '[.items[] | select(any(.metadata.finalizers[]?; startswith("nodewright.nvidia.com/")))] | length')
[ "$left" = 0 ] || die "$left NodeWright(s) still carry our finalizer"
hooks=$(kc get validatingwebhookconfigurations,mutatingwebhookconfigurations -o name | grep -c nodewright || true)
[ "$hooks" = 0 ] || die "webhook configurations left after the uninstall"
kc -n "$NS" get secret webhook-cert >/dev/null 2>&1 && die "the webhook certificate Secret is left"
timeout 20 "$KUBECTL" delete nodewright lc --wait=true >/dev/null || die "deleting a NodeWright after the uninstall hangs"
kc get crd nodewrights.nodewright.nvidia.com >/dev/null || die "the uninstall deleted the CRD (it must be kept)"
say "uninstall: no finalizer, no webhook configuration, no Secret left; CRDs kept; NodeWright deletable"

say "RBAC of $HOOK_SA (audit log vs the hook's grants):"
"$HELM_DIR/rbac-audit.sh" "$AUDIT" "$WORK/hook-rbac.json" "$NS" "$HOOK_SA" "$WORK/namespaced.txt" "$HELM_DIR/rbac-waivers.txt" >&2 \
  || die "the cleanup hook's RBAC is not minimal"
say "PASS"
