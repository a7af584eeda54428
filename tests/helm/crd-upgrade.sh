#!/usr/bin/env bash
# CRD upgrade mechanism of the chart (issue 12 part 4), on the running local control plane:
#   1. `helm install` a previous chart (version 0.1.0) whose NodeWright CRD lacks a field;
#   2. `helm upgrade` to chart/ adds the field to the served CRD;
#      A NodeWright then sets the field;
#   3. `helm rollback` to revision 1 keeps both CRDs (the older schema is re-applied) and the
#      NodeWright; the script reports whether the field is still served;
#   4. a second `helm upgrade` serves the field again with the NodeWright's value;
#   5. `helm uninstall` keeps both CRDs (`helm.sh/resource-policy: keep`);
#   6. from a chart of the 0.1.0 layout (CRDs in crds/, never owned by the release), `helm upgrade`
#      is refused ("invalid ownership metadata") and `helm upgrade --take-ownership` adopts and
#      updates the CRDs.
# The operator is not run (webhook.enable=false): only helm's handling of the CRDs is under test.
# CRDs that already exist (applied with kubectl, as tests/e2e does) are adopted with
# `--take-ownership --force-conflicts` (kubectl's field manager owns their fields) and left in
# place; CRDs this script created are deleted at the end.
#
# Usage: tests/helm/crd-upgrade.sh   (called by tests/helm/render.sh; needs KUBECONFIG of a running
#        local control plane, e.g. after `eval "$(tests/cluster/up.sh)"`)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=env.sh
. "$ROOT/tests/helm/env.sh"
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"
export KUBECONFIG=${KUBECONFIG:-$KUBECONFIG_PATH}
HELM=$HELM_BIN/helm
REL=nw-crd NS=nodewright-crd
NW=nodewrights.nodewright.nvidia.com DP=deploymentpolicies.nodewright.nvidia.com
FIELD=runtimeRequiredCordonAfter
kc() { "$KUBECTL" --request-timeout=30s "$@"; }
say() { printf '[crd-upgrade] %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nodewright-crd-upgrade.XXXXXX")

created=1 adopt=()
if kc get crd "$NW" >/dev/null 2>&1; then created=0 adopt=(--take-ownership --force-conflicts); fi
cleanup() {
  "$HELM" uninstall "$REL" -n "$NS" >/dev/null 2>&1 || true
  kc delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  if [ $created = 1 ]; then
    kc delete crd "$NW" "$DP" --wait=false >/dev/null 2>&1 || true
  else # hand the adopted CRDs back as found: no release owns them
    kc annotate crd "$NW" "$DP" meta.helm.sh/release-name- meta.helm.sh/release-namespace- >/dev/null 2>&1 || true
    kc label crd "$NW" "$DP" app.kubernetes.io/managed-by- >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The previous chart: the same templates, version 0.1.0, and a NodeWright CRD without $FIELD.
cp -r chart "$WORK/prev"
sed -i 's/^version: .*/version: 0.1.0/' "$WORK/prev/Chart.yaml"
kc create --dry-run=client -o json -f chart/files/crds/nodewright-crd.yaml \
  | jq "del(.spec.versions[].schema.openAPIV3Schema.properties.spec.properties.$FIELD)" \
  > "$WORK/prev/files/crds/nodewright-crd.yaml"

has_field() {
  kc get crd "$NW" -o json \
    | jq -e ".spec.versions[0].schema.openAPIV3Schema.properties.spec.properties | has(\"$FIELD\")" >/dev/null
}
kept() { kc get crd "$NW" "$DP" -o jsonpath='{.items[*].metadata.annotations.helm\.sh/resource-policy}'; }
# One replica and no PodDisruptionBudget: nothing runs the pod here, only the objects matter. No
# post-delete cleanup hook either: nothing would run its Job (tests/helm/lifecycle.sh covers it).
values=(--set controllerManager.replicas=1 --set controllerManager.podDisruptionBudget.minAvailable=null
        --set webhook.enable=false --set cleanup.enable=false)
nw_field() { kc get nodewright crd-upgrade -o jsonpath="{.spec.$FIELD}"; }

t0=$(date +%s%N)
"$HELM" install "$REL" "$WORK/prev" -n "$NS" --create-namespace "${adopt[@]}" "${values[@]}" >/dev/null \
  || fail "helm install of the previous chart"
t1=$(date +%s%N)
if [ $created = 1 ]; then
  ! has_field || fail "the previous chart's CRD already has spec.$FIELD"
else
  say "CRDs existed before: adopted with --take-ownership (their schema may already have the field)"
fi
[ "$(kept)" = "keep keep" ] || fail "CRDs lack helm.sh/resource-policy: keep after install: '$(kept)'"

"$HELM" upgrade "$REL" chart/ -n "$NS" "${values[@]}" >/dev/null || fail "helm upgrade to chart/"
t2=$(date +%s%N)
has_field || fail "helm upgrade did not add spec.$FIELD to the NodeWright CRD"
[ "$(kc get crd "$NW" -o jsonpath='{.metadata.labels.helm\.sh/chart}')" = "nodewright-$(sed -n 's/^version: //p' chart/Chart.yaml)" ] \
  || fail "the CRD's helm.sh/chart label does not name the upgraded chart"
say "upgrade added spec.$FIELD to $NW"
kc apply -f - >/dev/null <<EOF || fail "a NodeWright using spec.$FIELD was refused after the upgrade"
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata:
  name: crd-upgrade
spec:
  nodeSelectors:
    matchLabels:
      e2e.nodewright.test/case: crd-upgrade
  runtimeRequired: true
  $FIELD: true
EOF
[ "$(nw_field)" = true ] || fail "the NodeWright does not read back spec.$FIELD=true"

"$HELM" rollback "$REL" 1 -n "$NS" >/dev/null || fail "helm rollback to revision 1"
t3=$(date +%s%N)
kc get crd "$NW" "$DP" >/dev/null || fail "a CRD is gone after helm rollback"
if [ $created = 1 ]; then
  ! has_field || fail "helm rollback did not re-apply the previous CRD schema"
fi
kc get nodewright crd-upgrade >/dev/null || fail "the NodeWright is gone after helm rollback"
say "rollback kept both CRDs (previous schema re-applied) and the NodeWright; spec.$FIELD reads '$(nw_field)' under the old schema"

"$HELM" upgrade "$REL" chart/ -n "$NS" "${values[@]}" >/dev/null || fail "helm upgrade after the rollback"
has_field || fail "the second helm upgrade did not add spec.$FIELD"
[ "$(nw_field)" = true ] || fail "after rollback and upgrade spec.$FIELD reads '$(nw_field)', not true"
kc delete nodewright crd-upgrade --timeout=30s >/dev/null || fail "deleting the NodeWright"
"$HELM" uninstall "$REL" -n "$NS" >/dev/null || fail "helm uninstall"
t4=$(date +%s%N)
kc get crd "$NW" "$DP" >/dev/null || fail "a CRD is gone after helm uninstall"
has_field || fail "helm uninstall changed the CRD"
say "uninstall kept both CRDs"
ms() { echo $(( ($2 - $1) / 1000000 )); }
say "timings: install $(ms "$t0" "$t1") ms, upgrade $(ms "$t1" "$t2") ms, rollback $(ms "$t2" "$t3") ms, upgrade+uninstall $(ms "$t3" "$t4") ms"

# From the 0.1.0 layout (CRDs in crds/, which helm installs once and never owns): the first upgrade
# to this chart must adopt the CRDs. Without --take-ownership helm refuses; with it, it succeeds.
if [ $created = 0 ]; then
  say "CRDs existed before this script: the crds/-layout upgrade is not checked"
  exit 0
fi
kc delete crd "$NW" "$DP" --timeout=60s >/dev/null || fail "deleting the CRDs before the crds/-layout check"
legacy=$WORK/legacy
cp -r "$WORK/prev" "$legacy"
mv "$legacy/files/crds" "$legacy/crds"
rm "$legacy/templates/crds.yaml"
"$HELM" install "$REL" "$legacy" -n "$NS" "${values[@]}" >/dev/null || fail "helm install of the crds/-layout chart"
kc get crd "$NW" "$DP" >/dev/null || fail "the crds/-layout chart did not install the CRDs"
if out=$("$HELM" upgrade "$REL" chart/ -n "$NS" "${values[@]}" 2>&1); then
  fail "helm upgrade from the crds/ layout adopted the CRDs without --take-ownership"
fi
grep -q "invalid ownership metadata" <<<"$out" || fail "unexpected refusal: $out"
"$HELM" upgrade "$REL" chart/ -n "$NS" "${values[@]}" --take-ownership >/dev/null \
  || fail "helm upgrade --take-ownership from the crds/ layout"
has_field || fail "helm upgrade --take-ownership did not update the CRD"
[ "$(kc get crd "$NW" -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')" = "$REL" ] \
  || fail "the CRD is not owned by the release after --take-ownership"
[ "$(kept)" = "keep keep" ] || fail "adopted CRDs lack helm.sh/resource-policy: keep"
say "upgrade from the crds/ layout: refused without --take-ownership, CRDs adopted and updated with it"
