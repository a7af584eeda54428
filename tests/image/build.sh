#!/usr/bin/env bash
# Builds the operator image without a container daemon or a base image: the static binary from
# tests/image/binary.sh goes into one layer on an empty (scratch) base, packed by crane
# (go-containerregistry, built from the Go module proxy by tests/cluster/build.sh crane) through a
# throw-away in-memory registry on a loopback port. Same content and config as the Containerfile.
#
# Usage: tests/image/build.sh
#   Writes $NODEWRIGHT_CACHE/image/operator-rs-<version>.tar (a `docker save` tarball, loadable with
#   `docker load` / `podman load`, tagged ghcr.io/nvidia/nodewright/operator-rs:<version>) and prints
#   its path on stdout.
# Env:   NODEWRIGHT_IMAGE_REPO  repository of the tag (default: the chart's default repository)
#        NODEWRIGHT_CRANE       a crane binary to use instead of the cached build
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../cluster/versions.env
. "$ROOT/tests/cluster/versions.env"
cd "$ROOT"

REPO=${NODEWRIGHT_IMAGE_REPO:-ghcr.io/nvidia/nodewright/operator-rs}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' shell/Cargo.toml | head -n1)
OUT_DIR=$NODEWRIGHT_CACHE/image
OUT=$OUT_DIR/operator-rs-$VERSION.tar
# The image's runtime settings; the Containerfile states the same ones (tests/image/check.sh compares).
ENTRYPOINT=/nodewright-operator
IMAGE_USER=10001:10001

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case $(uname -m) in
  x86_64) ARCH=amd64 ;;
  aarch64) ARCH=arm64 ;;
  *) die "unsupported architecture $(uname -m)" ;;
esac

if [ -n "${NODEWRIGHT_CRANE:-}" ]; then
  CRANE=$NODEWRIGHT_CRANE
else
  [ -f "$CRANE_BIN/.complete" ] || "$ROOT/tests/cluster/build.sh" crane >&2
  CRANE=$CRANE_BIN/crane
fi

start=$(date +%s)
bin=$("$ROOT/tests/image/binary.sh")

WORK=$(mktemp -d)
REGISTRY_PID=
cleanup() {
  if [ -n "$REGISTRY_PID" ]; then kill "$REGISTRY_PID" 2>/dev/null || true; wait "$REGISTRY_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The one layer: /nodewright-operator, owned by root, not writable by the runtime user.
# Fixed owner, mode, order and time, so the same binary gives the same layer digest.
mkdir -p "$WORK/rootfs"
install -m 0555 "$bin" "$WORK/rootfs/nodewright-operator"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=gnu \
    -C "$WORK/rootfs" -cf "$WORK/layer.tar" nodewright-operator

# A registry that lives as long as this script, on a free loopback port.
"$CRANE" registry serve --address 127.0.0.1:0 > "$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
port=
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*serving on port \([0-9][0-9]*\).*/\1/p' "$WORK/registry.log" | head -n1)
  [ -n "$port" ] && break
  kill -0 "$REGISTRY_PID" 2>/dev/null || die "crane registry serve exited: $(cat "$WORK/registry.log")"
  sleep 0.1
done
[ -n "$port" ] || die "crane registry serve did not report its port: $(cat "$WORK/registry.log")"
staging=127.0.0.1:$port/nodewright/operator-rs:$VERSION

revision=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
"$CRANE" append --oci-empty-base -f "$WORK/layer.tar" -t "$staging" >/dev/null
mkdir -p "$OUT_DIR"
"$CRANE" mutate "$staging" \
  --entrypoint "$ENTRYPOINT" --user "$IMAGE_USER" --set-platform "linux/$ARCH" \
  -l org.opencontainers.image.title=nodewright-operator \
  -l org.opencontainers.image.description="NodeWright operator (Rust)" \
  -l org.opencontainers.image.version="$VERSION" \
  -l org.opencontainers.image.revision="$revision" \
  -l org.opencontainers.image.licenses=Apache-2.0 \
  -t "$REPO:$VERSION" -o "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "image $REPO:$VERSION -> $OUT ($(stat -c %s "$OUT") bytes; binary $(stat -c %s "$bin") bytes) in $(( $(date +%s) - start ))s"
echo "$OUT"
