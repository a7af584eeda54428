#!/usr/bin/env bash
# Build the local control plane's binaries from the Go module proxy into a cache outside the repo:
#   ${NODEWRIGHT_CACHE:-$HOME/.cache/nodewright}/bin/<component>-<version>/
# Idempotent: a component whose versioned directory holds a finished build (.complete stamp)
# is skipped; changing a pin in versions.env builds into a new directory.
#
# Usage: tests/cluster/build.sh [all|core|k8s|etcd|kwok|helm|chainsaw|crane|promtool|monitoring-crds]...
#   core = k8s etcd kwok (what up.sh needs); all (default) = core + helm.
#   chainsaw (no test uses it today) is built only when named.
#   crane (packs the operator image, tests/image/build.sh) is built only when named.
#   promtool (checks the chart's alerting rules, tests/helm/render.sh) is built only when named.
#   monitoring-crds (the ServiceMonitor, PodMonitor and PrometheusRule CRDs, copied from the
#   prometheus-operator module; tests/helm/render.sh dry-runs the chart's monitoring objects
#   against them) only when named.
# Env:   NODEWRIGHT_BUILD_JOBS (default 2) = go build -p; NODEWRIGHT_SKIP_OPTIONAL=1 skips helm in "all".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$HERE/versions.env"

command -v go >/dev/null || { echo "build.sh: go not found" >&2; exit 1; }
command -v jq >/dev/null || { echo "build.sh: jq not found (apt-get install -y jq)" >&2; exit 1; }

# Low CPU/memory: at most NODEWRIGHT_BUILD_JOBS packages compiled at once, use the local toolchain only.
JOBS=${NODEWRIGHT_BUILD_JOBS:-2}
export GOFLAGS="${GOFLAGS:-} -buildvcs=false -p=$JOBS"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export CGO_ENABLED=0

SRC="$NODEWRIGHT_CACHE/src"
mkdir -p "$NODEWRIGHT_CACHE/bin" "$SRC"
# Nothing to do when every requested binary is already built: return without waiting for the lock
# (another checkout may be building an unrelated tool).
dirs_of() {
  case $1 in
    all)  echo "$ETCD_BIN $KWOK_BIN $K8S_BIN"; [ "${NODEWRIGHT_SKIP_OPTIONAL:-0}" = 1 ] || echo "$HELM_BIN" ;;
    core) echo "$ETCD_BIN $KWOK_BIN $K8S_BIN" ;;
    k8s) echo "$K8S_BIN" ;; etcd) echo "$ETCD_BIN" ;; kwok) echo "$KWOK_BIN" ;; helm) echo "$HELM_BIN" ;;
    crane) echo "$CRANE_BIN" ;; chainsaw) echo "$CHAINSAW_BIN" ;; promtool) echo "$PROMTOOL_BIN" ;;
    monitoring-crds) echo "$MONITORING_CRDS" ;;
    *) echo "$NODEWRIGHT_CACHE/bin/.unknown" ;;
  esac
}
pending=0
for t in "${@:-all}"; do for d in $(dirs_of "$t"); do [ -f "$d/.complete" ] || pending=1; done; done
if [ "$pending" = 0 ]; then
  echo "[build] $* cached under $NODEWRIGHT_CACHE/bin" >&2
  exit 0
fi
# One build at a time per cache (up.sh may start builds from several checkouts/sessions).
exec 9>"$NODEWRIGHT_CACHE/.build.lock"
if ! flock -n 9; then
  echo "[build] another build.sh holds $NODEWRIGHT_CACHE/.build.lock; waiting" >&2
  flock 9
fi
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT   # neutral cwd for go commands outside any module

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
done_() { [ -f "$1/.complete" ]; }
# mark DIR: record what is in DIR and that the build finished.
mark() { local d=$1; shift; { date -u +%Y-%m-%dT%H:%M:%SZ; go version; printf '%s\n' "$@"; } > "$d/.complete"; }

# Fresh wrapper module dir (go.mod written by the caller).
wrapper() { local w="$SRC/$1"; rm -rf "$w"; mkdir -p "$w"; echo "$w"; }

build_k8s() {
  local out=$K8S_BIN
  if done_ "$out"; then log "k8s $K8S_VERSION: cached in $out"; return; fi
  log "k8s $K8S_VERSION: building kube-apiserver, kube-controller-manager, kubectl into $out"
  local staging="v0.${K8S_VERSION#v1.}" minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local kmod go_line godebug_line mods w
  kmod=$(cd "$TMP" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
  go_line=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kmod")
  godebug_line=$(grep -E '^godebug ' "$kmod" || true)
  # Staging modules: every `k8s.io/x => ./staging/...` replace of k8s.io/kubernetes' own go.mod.
  mods=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#\1#p' "$kmod")
  [ -n "$mods" ] || { echo "build.sh: no staging replaces found in $kmod" >&2; exit 1; }
  w=$(wrapper "k8s-$K8S_VERSION")
  {
    echo "module nodewright.invalid/k8s-bin"; echo
    echo "go $go_line"; echo
    if [ -n "$godebug_line" ]; then echo "$godebug_line"; echo; fi
    echo "require k8s.io/kubernetes $K8S_VERSION"; echo
    echo "replace ("
    for m in $mods; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    echo ")"
  } > "$w/go.mod"
  (cd "$w" && go get -tool \
     "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
     "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
     "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION")
  local ldf="-s -w" p bd
  bd=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitTreeState=clean -X $p.buildDate=$bd"
  done
  mkdir -p "$out"
  (cd "$w" && go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ldf" -o "$out/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kubectl)
  "$out/kube-apiserver" --version
  "$out/kube-controller-manager" --version
  mark "$out" kube-apiserver kube-controller-manager kubectl
}

build_etcd() {
  local out=$ETCD_BIN w
  if done_ "$out"; then log "etcd $ETCD_VERSION: cached in $out"; return; fi
  log "etcd $ETCD_VERSION: building into $out"
  w=$(wrapper "etcd-$ETCD_VERSION")
  printf 'module nodewright.invalid/etcd-bin\n\ngo 1.25.0\n' > "$w/go.mod"
  (cd "$w" && go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
  mkdir -p "$out"
  # -o is needed: the package's default binary name would be "v3"/"server".
  (cd "$w" && go build -trimpath -ldflags="-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  "$out/etcd" --version
  mark "$out" etcd
}

# go install MODULE/PKG@VERSION into DIR (modules without replace directives).
goinstall() {
  local out=$1 pkg=$2; shift 2
  mkdir -p "$out"
  (cd "$TMP" && GOBIN="$out" go install -trimpath "$@" "$pkg")
}

# kwok's upstream node stages (node-initialize, heartbeat-with-lease), copied from the module
# source next to the binary so that up.sh needs no Go toolchain; the pod stages are the project's
# own (tests/cluster/kwok/pod-stages.yaml).
kwok_stages() {
  local dir="$KWOK_BIN/stages" src
  [ -f "$dir/node-initialize.yaml" ] && [ -f "$dir/node-heartbeat-with-lease.yaml" ] && return
  src=$(cd "$TMP" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | jq -r .Dir)
  mkdir -p "$dir"
  cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
     "$src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" "$dir/"
  chmod u+w "$dir"/*.yaml
}

build_kwok() {
  local out=$KWOK_BIN
  if done_ "$out"; then log "kwok $KWOK_VERSION: cached in $out"; kwok_stages; return; fi
  log "kwok $KWOK_VERSION: building into $out"
  goinstall "$out" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" \
    -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
  "$out/kwok" --version || true
  kwok_stages
  mark "$out" kwok
}

build_helm() {
  local out=$HELM_BIN major=${HELM_VERSION%%.*}
  if done_ "$out"; then log "helm $HELM_VERSION: cached in $out"; return; fi
  log "helm $HELM_VERSION: building into $out"
  # helm v4 derives its offline default Kubernetes version from the client-go it is built with;
  # `helm template` callers pass --kube-version where it matters.
  goinstall "$out" "helm.sh/helm/$major/cmd/helm@$HELM_VERSION" \
    -ldflags="-s -w -X helm.sh/helm/$major/internal/version.version=$HELM_VERSION"
  "$out/helm" version
  mark "$out" helm
}

build_chainsaw() {
  local out=$CHAINSAW_BIN
  if done_ "$out"; then log "chainsaw $CHAINSAW_VERSION: cached in $out"; return; fi
  log "chainsaw $CHAINSAW_VERSION: building into $out"
  goinstall "$out" "github.com/kyverno/chainsaw@$CHAINSAW_VERSION" -ldflags="-s -w"
  "$out/chainsaw" version || true
  mark "$out" chainsaw
}

build_crane() {
  local out=$CRANE_BIN
  if done_ "$out"; then log "crane $CRANE_VERSION: cached in $out"; return; fi
  log "crane $CRANE_VERSION: building into $out"
  goinstall "$out" "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" -ldflags="-s -w"
  "$out/crane" version
  mark "$out" crane
}

build_promtool() {
  local out=$PROMTOOL_BIN
  if done_ "$out"; then log "promtool $PROMTOOL_VERSION: cached in $out"; return; fi
  log "promtool $PROMTOOL_VERSION: building into $out (about 3 minutes on 2 cores)"
  goinstall "$out" "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" \
    -ldflags="-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION"
  "$out/promtool" --version
  mark "$out" promtool
}

build_monitoring-crds() {
  local out=$MONITORING_CRDS src k
  if done_ "$out"; then log "monitoring CRDs $PROM_OPERATOR_VERSION: cached in $out"; return; fi
  log "monitoring CRDs $PROM_OPERATOR_VERSION: copying into $out"
  src=$(cd "$TMP" && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION" | jq -r .Dir)
  mkdir -p "$out"
  for k in servicemonitors podmonitors prometheusrules; do
    cp "$src/example/prometheus-operator-crd/monitoring.coreos.com_$k.yaml" "$out/"
  done
  chmod u+w "$out"/*.yaml
  mark "$out" monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml
}

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(all)
start=$(date +%s)
for t in "${targets[@]}"; do
  case $t in
    all)  build_etcd; build_kwok; build_k8s
          if [ "${NODEWRIGHT_SKIP_OPTIONAL:-0}" != 1 ]; then build_helm; fi ;;
    core) build_etcd; build_kwok; build_k8s ;;
    k8s|etcd|kwok|helm|chainsaw|crane|promtool|monitoring-crds) "build_$t" ;;
    *) echo "build.sh: unknown target $t" >&2; exit 2 ;;
  esac
done
log "done in $(( $(date +%s) - start ))s; binaries under $NODEWRIGHT_CACHE/bin"
