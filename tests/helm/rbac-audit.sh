#!/usr/bin/env bash
# Compares what a ServiceAccount used (the apiserver's audit log) with what RBAC grants it (the
# ClusterRoles/Roles bound to it in a rendered manifest). Prints one table row per
# (verb, group/resource, scope) and fails when a grant was never used (unless waived with a
# reason), when a ClusterRole grant on a namespaced resource was only used in the operator's
# namespace (it belongs in a Role), or when a request was forbidden (a missing grant).
#
# Usage: tests/helm/rbac-audit.sh AUDIT_LOG RBAC_JSON NAMESPACE SERVICEACCOUNT NAMESPACED_RESOURCES WAIVERS
#   RBAC_JSON             the release's roles and bindings as installed:
#                         kubectl get clusterroles,roles,clusterrolebindings,rolebindings -A -l ... -o json
#   NAMESPACED_RESOURCES  file with one "group/resource" per line for namespaced resources
#                         ("core/pods"), from kubectl api-resources --namespaced=true
#   WAIVERS               lines "verb group/resource scope  # reason": needed, not exercised
# Scope is "cluster" (a ClusterRole: cluster-scoped objects, or every namespace) or "ns" (the
# operator's namespace, through a Role).
set -euo pipefail
audit=$1 rbac=$2 ns=$3 sa=$4 namespaced=$5 waivers=$6
user="system:serviceaccount:$ns:$sa"

# granted: "verb group/resource scope" (resourceNames restrict objects, not the tuple)
granted=$(jq -r --arg ns "$ns" --arg sa "$sa" '
  .items as $docs
  | [ $docs[] | select(.kind == "ClusterRoleBinding" or .kind == "RoleBinding")
      | select(any(.subjects[]?; .kind == "ServiceAccount" and .name == $sa and .namespace == $ns))
      | {kind: .roleRef.kind, name: .roleRef.name, scope: (if .kind == "ClusterRoleBinding" then "cluster" else "ns" end)} ] as $bound
  | $bound[] as $b
  | $docs[] | select(.kind == $b.kind and .metadata.name == $b.name)
  | .rules[] | .apiGroups[] as $g | .resources[] as $r | .verbs[] as $v
  | "\($v) \(if $g == "" then "core" else $g end)/\($r) \($b.scope)"' "$rbac" | sort -u)

# used: successful requests of the ServiceAccount
used=$(jq -rc --arg u "$user" --arg ns "$ns" '
  select(.user.username == $u and .stage == "ResponseComplete" and .objectRef != null)
  | select((.responseStatus.code // 0) != 403)
  | .objectRef as $o
  | "\(.verb) \(if ($o.apiGroup // "") == "" then "core" else $o.apiGroup end)/\($o.resource)\(if $o.subresource then "/" + $o.subresource else "" end) \(if ($o.namespace // "") == $ns then "ns" elif ($o.namespace // "") == "" then "cluster" else "other-ns" end)"' "$audit" | sort | uniq -c | awk '{print $2, $3, $4, $1}')
forbidden=$(jq -rc --arg u "$user" '
  select(.user.username == $u and .stage == "ResponseComplete" and (.responseStatus.code // 0) == 403)
  | "\(.verb) \(.objectRef.apiGroup // "core")/\(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.objectRef.namespace // "-") \(.requestURI)"' "$audit" | sort -u)

waived() { grep -E "^$1 $2 $3( |$)" "$waivers" 2>/dev/null | sed 's/^[^#]*# *//' | head -n1; }
is_namespaced() { grep -qx "$1" "$namespaced"; }

fail=0
printf '%-8s %-52s %-8s %-10s %s\n' VERB RESOURCE SCOPE REQUESTS VERDICT
while read -r verb res scope; do
  [ -n "$verb" ] || continue
  if [ "$scope" = cluster ] && is_namespaced "$res"; then
    any=$(awk -v v="$verb" -v r="$res" '$1==v && $2==r {s+=$4} END {print s+0}' <<< "$used")
    outside=$(awk -v v="$verb" -v r="$res" '$1==v && $2==r && $3!="ns" {s+=$4} END {print s+0}' <<< "$used")
  else
    any=$(awk -v v="$verb" -v r="$res" -v s="$scope" '$1==v && $2==r && ($3==s || (s=="cluster" && $3=="other-ns")) {n+=$4} END {print n+0}' <<< "$used")
    outside=$any
  fi
  if [ "$outside" -gt 0 ]; then verdict=used
  elif [ "$any" -gt 0 ]; then verdict="UNUSED-OUTSIDE-NAMESPACE (make it a Role)"; fail=1
  elif w=$(waived "$verb" "$res" "$scope") && [ -n "$w" ]; then verdict="waived: $w"
  else verdict=UNUSED; fail=1
  fi
  printf '%-8s %-52s %-8s %-10s %s\n' "$verb" "$res" "$scope" "$any" "$verdict"
done <<< "$granted"

# used but not granted can only happen through another identity's grant (e.g. system:basic-user)
while read -r verb res scope count; do
  [ -n "$verb" ] || continue
  s=$scope; [ "$s" = other-ns ] && s=cluster
  if ! grep -qx "$verb $res $s" <<< "$granted" && ! { [ "$s" = ns ] && grep -qx "$verb $res cluster" <<< "$granted"; }; then
    printf '%-8s %-52s %-8s %-10s %s\n' "$verb" "$res" "$scope" "$count" "used, granted by a default role"
  fi
done <<< "$used"

if [ -n "$forbidden" ]; then
  echo "FORBIDDEN requests (missing grants):"; echo "$forbidden"; fail=1
fi
exit $fail
