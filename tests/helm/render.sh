#!/usr/bin/env bash
# Static checks of the Helm chart (chart/) with the pinned helm (tests/cluster/versions.env):
#   1. `helm lint --strict` with every values file in tests/helm/values/;
#   2. golden renders: `helm template` of each values file equals tests/helm/golden/<name>.yaml,
#      and its NOTES.txt (client-side install dry-run) equals golden/<name>.notes.txt;
#      then the PrometheusRule's groups pass `promtool check rules` and `promtool test rules`
#      with tests/helm/alerts-test.yaml (NODEWRIGHT_SKIP_PROMTOOL=1
#      skips this; the first run builds promtool, about 3 minutes);
#   3. refused values: each bad value in the table below makes `helm template` fail with the
#      expected message (values.schema.json or templates/validations.yaml);
#   4. every rendered object of every golden is accepted by a real kube-apiserver
#      (`kubectl apply --dry-run=server`; the ServiceMonitor, PodMonitor and PrometheusRule of the
#      custom values against prometheus-operator's CRDs), when the local control plane binaries
#      are built;
#   5. CRD upgrade: `helm upgrade` from a previous chart whose CRD lacks a field adds the field,
#      and rollback and uninstall keep both CRDs (`helm.sh/resource-policy: keep`).
#
# Usage: tests/helm/render.sh [--update]   # --update rewrites the goldens instead of comparing
# Env:   NODEWRIGHT_HELM_CLUSTER=0 skips steps 4-5. Steps 4-5 use a private cluster instance
#        (tests/helm/env.sh: NODEWRIGHT_RUN=/tmp/nodewright-helm, own ports; override from the
#        environment); when it was not running it is started and stopped (down.sh) at the end.
# Ends with "N passed, N failed"; exit status 1 when any check failed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/helm
cd "$ROOT"
# shellcheck source=env.sh
. "$ROOT/tests/helm/env.sh"
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"

update=0
[ "${1:-}" = --update ] && update=1

passed=0; failed=0; failures=()
say()  { printf '[helm] %s\n' "$*" >&2; }
ok()   { passed=$((passed + 1)); say "PASS: $*"; }
bad()  { failed=$((failed + 1)); failures+=("$*"); say "FAIL: $*"; }

HELM=$HELM_BIN/helm
[ -x "$HELM" ] || "$ROOT/tests/cluster/build.sh" helm >&2
export HELM_CACHE_HOME=${TMPDIR:-/tmp}/nodewright-helm-cache HELM_CONFIG_HOME=${TMPDIR:-/tmp}/nodewright-helm-config
KUBE_VERSION=${K8S_VERSION#v}
RELEASE=nodewright NS=nodewright
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nodewright-helm.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
template() { "$HELM" template "$RELEASE" chart/ -n "$NS" --kube-version "$KUBE_VERSION" "$@"; }

# --- 1. lint ------------------------------------------------------------------------------------
cases=()
for f in "$HERE"/values/*.yaml; do cases+=("$(basename "$f" .yaml)"); done
for c in "${cases[@]}"; do
  if out=$("$HELM" lint chart/ --strict -n "$NS" --kube-version "$KUBE_VERSION" -f "$HERE/values/$c.yaml" 2>&1); then
    ok "helm lint --strict ($c): $(printf '%s\n' "$out" | tail -1)"
  else
    bad "helm lint --strict ($c)"; printf '%s\n' "$out" >&2
  fi
done

# --- 2. golden renders --------------------------------------------------------------------------
for c in "${cases[@]}"; do
  golden=$HERE/golden/$c.yaml
  if ! template -f "$HERE/values/$c.yaml" > "$WORK/$c.yaml" 2> "$WORK/$c.err"; then
    bad "helm template ($c)"; cat "$WORK/$c.err" >&2; continue
  fi
  if [ $update = 1 ]; then
    cp "$WORK/$c.yaml" "$golden"; ok "golden $c updated ($(grep -c '^kind:' "$golden") objects)"
  elif diff -u "$golden" "$WORK/$c.yaml" > "$WORK/$c.diff"; then
    ok "golden $c ($(grep -c '^kind:' "$golden") objects)"
  else
    bad "golden $c differs (run tests/helm/render.sh --update and review the diff)"; head -60 "$WORK/$c.diff" >&2
  fi
  # NOTES.txt is rendered only by install/upgrade: a client-side dry-run prints it last.
  notes=$HERE/golden/$c.notes.txt
  { "$HELM" install "$RELEASE" chart/ -n "$NS" --dry-run=client -f "$HERE/values/$c.yaml" 2>&1 || true; } \
    | sed -n '/^NOTES:$/,$p' > "$WORK/$c.notes.txt"
  if [ ! -s "$WORK/$c.notes.txt" ]; then
    bad "NOTES.txt ($c) not rendered"
  elif [ $update = 1 ]; then
    cp "$WORK/$c.notes.txt" "$notes"; ok "golden $c.notes.txt updated"
  elif diff -u "$notes" "$WORK/$c.notes.txt" >&2; then
    ok "golden $c.notes.txt"
  else
    bad "golden $c.notes.txt differs (run tests/helm/render.sh --update and review the diff)"
  fi
done

# --- 2b. alerting rules -------------------------------------------------------------------------
# The rule groups of the rendered PrometheusRule (monitoring.prometheusRule.enabled) must pass
# `promtool check rules` (pinned promtool, tests/cluster/build.sh promtool) and hold every alert of
# chart/files/monitoring/alerts.yaml; the unit tests of tests/helm/alerts-test.yaml must pass.
if [ "${NODEWRIGHT_SKIP_PROMTOOL:-0}" = 1 ]; then
  say "NODEWRIGHT_SKIP_PROMTOOL=1: skipping promtool check rules"
else
  [ -x "$PROMTOOL_BIN/promtool" ] || "$ROOT/tests/cluster/build.sh" promtool >&2
  alerts=$(grep -c '^ *- alert:' chart/files/monitoring/alerts.yaml)
  # spec: of the PrometheusRule, de-indented: a Prometheus rule file (groups: ...).
  template --show-only templates/monitoring.yaml --set monitoring.prometheusRule.enabled=true \
    | awk '/^kind: PrometheusRule$/ {r = 1} /^---/ {r = 0; s = 0} r && /^spec:$/ {s = 1; next} s {sub(/^  /, ""); print}' \
    > "$WORK/rules.yaml"
  if out=$("$PROMTOOL_BIN/promtool" check rules "$WORK/rules.yaml" 2>&1) \
     && grep -q "SUCCESS: $alerts rules found" <<<"$out"; then
    ok "promtool check rules (the chart's PrometheusRule): $alerts rules"
  else
    bad "promtool check rules (the chart's PrometheusRule, $alerts alerts expected)"; printf '%s\n' "$out" >&2
  fi
  cp "$HERE/alerts-test.yaml" "$WORK/"
  if out=$("$PROMTOOL_BIN/promtool" test rules "$WORK/alerts-test.yaml" 2>&1); then
    ok "promtool test rules (tests/helm/alerts-test.yaml): $(grep -c 'alertname:' "$HERE/alerts-test.yaml") alert evaluations"
  else
    bad "promtool test rules (tests/helm/alerts-test.yaml)"; printf '%s\n' "$out" >&2
  fi
fi

# The commands of docs/user-guide.md "Install", verbatim (helm's default Kubernetes version).
if out=$("$HELM" lint chart/ -n nodewright 2>&1); then ok "docs: helm lint chart/ -n nodewright"
else bad "docs: helm lint chart/ -n nodewright"; printf '%s\n' "$out" >&2; fi
if "$HELM" template nodewright chart/ -n nodewright 2>&1 | cmp -s - "$HERE/golden/default.yaml"; then
  ok "docs: helm template nodewright chart/ -n nodewright renders the default golden"
else
  bad "docs: helm template nodewright chart/ -n nodewright differs from golden/default.yaml"
fi

# --- 3. refused values --------------------------------------------------------------------------
# Each row: expected text in helm's error | helm arguments. The expected text names the offending
# value, so a row passes only when helm refuses for the right reason.
refused=(
  "controllerManager/replicas|--set controllerManager.replicas=0"
  "controllerManager/replicas|--set controllerManager.replicas=two"
  "controllerManager/manager/env/logLevel|--set controllerManager.manager.env.logLevel=verbose"
  "webhook/url|--set webhook.url=http://127.0.0.1:9443"
  "webhook/certValidity|--set webhook.certValidity=1y"
  "controllerManager/manager/env/metricsSecure|--set controllerManager.manager.env.metricsSecure=yes"
  "controllerManager/manager/env/logEncoder|--set controllerManager.manager.env.logEncoder=text"
  "controllerManager/manager/env/metricsPort|--set controllerManager.manager.env.metricsPort=8443"
  "controllerManager/manager/env/probePort|--set controllerManager.manager.env.probePort=:70000"
  "controllerManager/manager/env/leaderElection|--set controllerManager.manager.env.leaderElection=yes"
  "controllerManager/manager/env/jobTtlSucceeded|--set controllerManager.manager.env.jobTtlSucceeded=1hour"
  "controllerManager/manager/env/jobBackoffLimit|--set controllerManager.manager.env.jobBackoffLimit=-1"
  "controllerManager/manager/env/copyDirRoot|--set controllerManager.manager.env.copyDirRoot=var/lib"
  "controllerManager/manager/env/runtimeRequiredTaint|--set controllerManager.manager.env.runtimeRequiredTaint=example.com/x=y:NoSchedule"
  "controllerManager/manager/env/pauseImage|--set controllerManager.manager.env.pauseImage=registry.k8s.io/pause"
  "controllerManager/manager/env/effectConcurrency|--set controllerManager.manager.env.effectConcurrency=0"
  "controllerManager/manager/env/effectConcurrency|--set-string controllerManager.manager.env.effectConcurrency=257"
  "controllerManager/manager/agent/tag|--set controllerManager.manager.agent.tag=latest"
  "controllerManager/manager/agent/tag|--set controllerManager.manager.agent.tag="
  "controllerManager/manager/image/digest|--set controllerManager.manager.image.digest=abc"
  "controllerManager/manager/image/pullPolicy|--set controllerManager.manager.image.pullPolicy=Sometimes"
  "controllerManager/manager/extraEnv|--set-json controllerManager.manager.extraEnv=[{\"value\":\"x\"}]"
  "controllerManager/manager/resources|--set controllerManager.manager.resources.cpu=1"
  "controllerManager/podLabels|--set-json controllerManager.podLabels={\"team\":1}"
  "controllerManager/priorityClassName|--set controllerManager.priorityClassName=Critical_Pods"
  "controllerManager/nodeAffinity/matchExpressions|--set-json controllerManager.nodeAffinity.matchExpressions=[{\"key\":\"a\",\"operator\":\"Has\"}]"
  "controllerManager/podDisruptionBudget/minAvailable|--set controllerManager.podDisruptionBudget.minAvailable=50%"
  "metricsService/type|--set metricsService.type=Ingress"
  "webhookService/port|--set webhookService.port=0"
  "webhook/port|--set webhook.port=65536"
  "webhook/serviceName|--set webhook.serviceName=Webhook.Service"
  "webhook/enable|--set webhook.enable=maybe"
  "estimatedNodeCount|--set estimatedNodeCount=0"
  "crds/install|--set crds.install=sometimes"
  "leaderElection|--set controllerManager.manager.env.leaderElection=false"
  "additional properties 'replica' not allowed|--set controllerManager.replica=2"
  "additional properties 'ports' not allowed|--set webhookService.ports=443"
  "mutually exclusive|--set controllerManager.selectors.a=b --set-json controllerManager.nodeAffinity.matchExpressions=[{\"key\":\"a\",\"operator\":\"Exists\"}]"
  "must be lower than controllerManager.replicas|--set controllerManager.podDisruptionBudget.minAvailable=2"
  "not default|-n default"
)
for row in "${refused[@]}"; do
  expect=${row%%|*} args=${row#*|}
  read -ra argv <<<"$args"   # split on spaces only; no value in the table contains one
  if out=$(template "${argv[@]}" 2>&1); then
    bad "refused: $args was accepted"
  elif grep -qF -- "$expect" <<<"$out"; then
    ok "refused: $args"
  else
    bad "refused: $args failed without mentioning '$expect'"; printf '%s\n' "$out" | tail -5 >&2
  fi
done

# --- 4. server-side dry-run ---------------------------------------------------------------------
cluster_ready() { [ -e "$K8S_BIN/kube-apiserver" ] && [ -e "$ETCD_BIN/etcd" ] && [ -e "$KWOK_BIN/kwok" ]; }
if [ "${NODEWRIGHT_HELM_CLUSTER:-1}" = 0 ]; then
  say "NODEWRIGHT_HELM_CLUSTER=0: skipping the server-side dry-run and the CRD upgrade"
elif ! cluster_ready; then
  say "SKIP: local control plane binaries are not built (tests/cluster/build.sh core); no server-side dry-run, no CRD upgrade"
else
  was_up=0
  if pid_of kube-apiserver >/dev/null && apiserver_ready 2>/dev/null; then was_up=1; fi
  NODEWRIGHT_AUTO_BUILD=0 "$ROOT/tests/cluster/up.sh" >/dev/null
  [ $was_up = 1 ] || trap 'rm -rf "$WORK"; "$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true' EXIT
  export KUBECONFIG=$KUBECONFIG_PATH
  kc() { "$KUBECTL" --request-timeout=30s "$@"; }
  # A server-side dry-run of namespaced objects needs the namespace; the monitoring objects of the
  # custom values need the monitoring.coreos.com CRDs (prometheus-operator's, build.sh monitoring-crds).
  kc get namespace "$NS" >/dev/null 2>&1 || kc create namespace "$NS" >/dev/null
  "$ROOT/tests/cluster/build.sh" monitoring-crds >&2
  kc apply --server-side --force-conflicts -f "$MONITORING_CRDS/" >/dev/null
  wait_for 60 "monitoring.coreos.com CRDs Established" kc wait --for=condition=Established --timeout=5s \
    crd/servicemonitors.monitoring.coreos.com crd/podmonitors.monitoring.coreos.com \
    crd/prometheusrules.monitoring.coreos.com || bad "monitoring.coreos.com CRDs not Established"
  for c in "${cases[@]}"; do
    if out=$(kc apply --dry-run=server -f "$WORK/$c.yaml" 2>&1); then
      ok "kubectl apply --dry-run=server ($c): $(grep -c 'server dry run' <<<"$out") objects accepted"
    else
      bad "kubectl apply --dry-run=server ($c)"; printf '%s\n' "$out" | grep -v 'server dry run' >&2
    fi
  done
  "$HERE/crd-upgrade.sh" && ok "CRD upgrade, rollback and uninstall keep (tests/helm/crd-upgrade.sh)" \
    || bad "CRD upgrade (tests/helm/crd-upgrade.sh)"
fi

say "$passed passed, $failed failed"
for f in "${failures[@]}"; do say "  failed: $f"; done
[ "$failed" = 0 ]
