#!/usr/bin/env bash
# Checks the operator image built by tests/image/build.sh: its config (tag, entrypoint, user,
# platform) matches the chart and the Containerfile, its filesystem holds only the operator binary,
# and that binary runs from an isolated root holding only the image's files (a new user, mount,
# pid and network namespace, chrooted into the unpacked layers, as uid 10001, empty environment):
#   - `--version` prints `nodewright-operator <version>` and exits 0;
#   - an unknown argument exits 2;
#   - a start without a cluster exits 1 within 30 s with one clear error line, no panic;
# and `crane push` of the tarball to a loopback registry serves the same image.
# With --with-cluster it also runs the image's binary from its isolated root (host network this
# time) against the local control plane of tests/cluster (started with up.sh when not running, and
# stopped again at the end; NODEWRIGHT_RUN and the *_PORT variables select it), waits until its
# caches are synced and stops it with SIGTERM, as a kubelet would (expects exit 0).
#
# Usage: tests/image/check.sh [--with-cluster] [IMAGE_TAR]
#   IMAGE_TAR defaults to $NODEWRIGHT_CACHE/image/operator-rs-<version>.tar.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"

WITH_CLUSTER=0
if [ "${1:-}" = --with-cluster ]; then WITH_CLUSTER=1; shift; fi
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/shell/Cargo.toml" | head -n1)
TAR=${1:-$NODEWRIGHT_CACHE/image/operator-rs-$VERSION.tar}
REPO=${NODEWRIGHT_IMAGE_REPO:-ghcr.io/nvidia/nodewright/operator-rs}

say() { printf '[image-check] %s\n' "$*"; }
fail() { printf '[image-check] FAIL: %s\n' "$*" >&2; exit 1; }
[ -f "$TAR" ] || fail "no image tarball at $TAR (run tests/image/build.sh)"
if [ -n "${NODEWRIGHT_CRANE:-}" ]; then
  CRANE=$NODEWRIGHT_CRANE
else
  [ -f "$CRANE_BIN/.complete" ] || "$ROOT/tests/cluster/build.sh" crane >&2
  CRANE=$CRANE_BIN/crane
fi

WORK=$(mktemp -d)
OP_PID=
REGISTRY_PID=
STOP_CLUSTER=0
cleanup() {
  if [ -n "$REGISTRY_PID" ]; then kill "$REGISTRY_PID" 2>/dev/null || true; wait "$REGISTRY_PID" 2>/dev/null || true; fi
  if [ -n "$OP_PID" ]; then kill "$OP_PID" 2>/dev/null || true; wait "$OP_PID" 2>/dev/null || true; fi
  if [ "$STOP_CLUSTER" = 1 ]; then "$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- the image's config -------------------------------------------------------------------
mkdir -p "$WORK/image" "$WORK/rootfs"
tar -xf "$TAR" -C "$WORK/image"
manifest=$WORK/image/manifest.json
[ "$(jq length "$manifest")" = 1 ] || fail "expected one image in $TAR"
tag=$(jq -r '.[0].RepoTags[0]' "$manifest")
config=$WORK/image/$(jq -r '.[0].Config' "$manifest")
entrypoint=$(jq -c '.config.Entrypoint' "$config")
user=$(jq -r '.config.User' "$config")
platform=$(jq -r '"\(.os)/\(.architecture)"' "$config")
say "tag $tag, entrypoint $entrypoint, user $user, platform $platform"
say "labels $(jq -c '.config.Labels' "$config")"
[ "$tag" = "$REPO:$VERSION" ] || fail "tag $tag, expected $REPO:$VERSION"
[ "$entrypoint" = '["/nodewright-operator"]' ] || fail "entrypoint $entrypoint"
[ "$user" = 10001:10001 ] || fail "user $user, expected 10001:10001 (non-root)"
[ "${platform%/*}" = linux ] || fail "platform $platform"
[ "$(jq -r '.config.Labels["org.opencontainers.image.version"]' "$config")" = "$VERSION" ] ||
  fail "version label differs from $VERSION"

# The Containerfile states the same runtime settings.
grep -qx 'USER 10001:10001' "$ROOT/Containerfile" || fail "Containerfile: no 'USER 10001:10001'"
grep -qx 'ENTRYPOINT \["/nodewright-operator"\]' "$ROOT/Containerfile" ||
  fail "Containerfile: no 'ENTRYPOINT [\"/nodewright-operator\"]'"
grep -qx 'FROM scratch' "$ROOT/Containerfile" || fail "Containerfile: final stage is not FROM scratch"

# The chart's default image is this image.
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/chart/Chart.yaml")
[ "$app_version" = "$VERSION" ] || fail "chart appVersion $app_version != operator version $VERSION"
if [ -x "$HELM_BIN/helm" ]; then
  rendered=$("$HELM_BIN/helm" template nodewright "$ROOT/chart" -n nodewright |
             sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' | sed '/^$/d' | sort -u)
  say "chart renders images: $(printf '%s' "$rendered" | paste -sd' ')"
  printf '%s\n' "$rendered" | grep -qx "$REPO:$VERSION" || fail "the chart's default image is not $REPO:$VERSION"
else
  grep -q "repository: $REPO\$" "$ROOT/chart/values.yaml" || fail "chart/values.yaml does not default to $REPO"
fi

# --- the image's files --------------------------------------------------------------------
while read -r layer; do
  tar -xf "$WORK/image/$layer" -C "$WORK/rootfs"
done < <(jq -r '.[0].Layers[]' "$manifest")
files=$(cd "$WORK/rootfs" && find . -mindepth 1 -printf '%M %U:%G %s %p\n')
say "image files:"; printf '    %s\n' "$files"
[ "$(printf '%s\n' "$files" | wc -l)" = 1 ] || fail "the image holds more than the operator binary"
unpacked=$(du -sb "$WORK/rootfs" | cut -f1)
say "sizes: tarball $(stat -c %s "$TAR") bytes, unpacked $unpacked bytes"

# in_image SECONDS ARGS...: run the entrypoint in an isolated root as uid 10001 with the image's
# environment only. Network namespace unless WITH_NET=1.
in_image() {
  local secs=$1; shift
  local -a env_args=() ns=(--user --map-user=10001 --map-group=10001 --mount --pid --fork)
  [ "${WITH_NET:-0}" = 1 ] || ns+=(--net)
  mapfile -t env_args < <(jq -r '.config.Env // [] | .[]' "$config")
  timeout --kill-after=5 "$secs" env -i "${env_args[@]}" "${EXTRA_ENV[@]}" \
    unshare "${ns[@]}" --root="$WORK/rootfs" /nodewright-operator "$@"
}
EXTRA_ENV=()

# image_process PID: the pid of the image's entrypoint process below PID (subshell, timeout, unshare).
image_process() {
  local p=$1 c
  for _ in 1 2 3 4; do
    c=$(ps -o pid= --ppid "$p" | head -n1 | tr -d ' ')
    [ -n "$c" ] || return 1
    p=$c
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = nodewright-oper ] && { echo "$p"; return 0; }
  done
  return 1
}

# --- --version ----------------------------------------------------------------------------
out=$(in_image 10 --version 2>&1) || fail "--version exited $?: $out"
say "--version: $out"
[ "$out" = "nodewright-operator $VERSION" ] || fail "--version printed '$out'"

# --- unknown argument ---------------------------------------------------------------------
rc=0; in_image 10 --no-such-flag > "$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "an unknown argument exited $rc, expected 2: $(cat "$WORK/bad.out")"
say "unknown argument: exit 2 ($(head -n1 "$WORK/bad.out"))"

# --- a start without a cluster ------------------------------------------------------------
rc=0; t0=$(date +%s%N)
in_image 30 > "$WORK/start.out" 2>&1 || rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
say "start without a cluster: exit $rc after ${ms} ms, output:"
sed 's/^/    /' "$WORK/start.out"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "the start without a cluster did not end within 30 s"
[ "$rc" = 1 ] || fail "the start without a cluster exited $rc, expected 1"
! grep -qiE 'panicked|backtrace' "$WORK/start.out" || fail "the operator panicked"
[ "$(wc -l < "$WORK/start.out")" = 1 ] || fail "expected exactly one line of output"
jq -e 'select(.level == "ERROR" and (.error | test("cannot find a kubeconfig or in-cluster configuration")))' "$WORK/start.out" >/dev/null ||
  fail "the line is not an ERROR log naming the missing cluster"

# --- push to a registry (the command docs/user-guide.md gives) -----------------------------
# A throw-away in-memory registry on a free loopback port; the pushed image must be the tarball's.
"$CRANE" registry serve --address 127.0.0.1:0 > "$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
port=
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$WORK/registry.log" | head -n1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || fail "crane registry serve did not start: $(cat "$WORK/registry.log")"
pushed=127.0.0.1:$port/nodewright/operator-rs:$VERSION
"$CRANE" push "$TAR" "$pushed" >/dev/null 2>"$WORK/push.err" || fail "crane push: $(cat "$WORK/push.err")"
remote_config=$("$CRANE" config "$pushed" | sha256sum | cut -d' ' -f1)
[ "sha256:$remote_config" = "$(jq -r '.[0].Config' "$manifest")" ] ||
  fail "the pushed image's config sha256:$remote_config is not the tarball's $(jq -r '.[0].Config' "$manifest")"
say "crane push: $pushed has the tarball's config (sha256:${remote_config:0:12}...), digest $("$CRANE" digest "$pushed")"
kill "$REGISTRY_PID" 2>/dev/null; wait "$REGISTRY_PID" 2>/dev/null || true; REGISTRY_PID=

if [ "$WITH_CLUSTER" = 1 ]; then
  # --- against the local control plane (tests/cluster/up.sh) -------------------------------
  if ! { pid_of kube-apiserver >/dev/null && apiserver_ready 2>/dev/null; }; then STOP_CLUSTER=1; fi
  "$ROOT/tests/cluster/up.sh" >/dev/null
  ns=nodewright-image-check
  kc get namespace "$ns" >/dev/null 2>&1 || kc create namespace "$ns" >/dev/null
  while read -r crd; do kc apply -f "$crd" >/dev/null; done < <(find "$ROOT/chart" -path '*/crds/*' -name '*.yaml' | sort)
  install -m 0444 "$KUBECONFIG_PATH" "$WORK/rootfs/kubeconfig"
  EXTRA_ENV=(KUBECONFIG=/kubeconfig NAMESPACE=$ns ENABLE_WEBHOOKS=false
             LEADER_ELECTION=false METRICS_PORT=0 PROBE_PORT=0 LOG_LEVEL=debug)
  WITH_NET=1 in_image 120 > "$WORK/cluster.out" 2>&1 &
  OP_PID=$!
  ok=0
  for _ in $(seq 1 120); do
    if grep -q 'caches synced' "$WORK/cluster.out" 2>/dev/null; then ok=1; break; fi
    kill -0 "$OP_PID" 2>/dev/null || break
    sleep 0.5
  done
  grep -m1 'apiserver version' "$WORK/cluster.out" | sed 's/^/    /' || true
  [ "$ok" = 1 ] || { sed 's/^/    /' "$WORK/cluster.out" | tail -n 30; fail "the image's binary did not sync its caches against the local cluster"; }
  # SIGTERM to the operator (pid 1 of its pid namespace, below timeout and unshare), as a kubelet does.
  op=$(image_process "$OP_PID") || fail "cannot find the operator process below pid $OP_PID"
  kill -TERM "$op"
  rc=0; wait "$OP_PID" || rc=$?; OP_PID=
  say "against the local cluster: synced, exit $rc after SIGTERM"
  [ "$rc" = 0 ] || { tail -n 20 "$WORK/cluster.out"; fail "exit $rc after SIGTERM"; }
fi
say "OK"
