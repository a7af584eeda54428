#!/usr/bin/env bash
# Build the Go operator (NVIDIA/nodewright, the `skyhook.nvidia.com` operator) from a source tree
# the caller has extracted, for the side-by-side comparison in tests/peer and tests/scale. Nothing of
# the Go source is kept in this repository: the binary is cached outside it, like the control plane,
#   ${NODEWRIGHT_CACHE:-$HOME/.cache/nodewright}/bin/<name of SRC_DIR>/manager
# with a .complete stamp (source dir, go version, module, build time). Dependencies come from the Go
# module proxy (GOPROXY, -mod=mod), not from a vendor directory the source tree may carry.
# Idempotent: a finished build is not rebuilt unless PEER_REBUILD=1.
#
# Usage: tests/peer/build.sh SRC_DIR         (e.g. ~/.cache/nodewright/src/nodewright-go-v0.15.0)
# Prints the binary's path on stdout.
# Env:   PEER_NAME               cache directory name (default: basename of SRC_DIR)
#        NODEWRIGHT_BUILD_JOBS   go build -p (default 2)
set -euo pipefail
SRC_DIR=${1:?usage: tests/peer/build.sh SRC_DIR}
SRC_DIR=$(cd "$SRC_DIR" && pwd)
OP_DIR=$SRC_DIR/operator
[ -f "$OP_DIR/go.mod" ] && [ -f "$OP_DIR/cmd/manager/main.go" ] \
  || { echo "build.sh: $SRC_DIR has no operator/go.mod with operator/cmd/manager" >&2; exit 2; }
command -v go >/dev/null || { echo "build.sh: go not found" >&2; exit 1; }

CACHE=${NODEWRIGHT_CACHE:-$HOME/.cache/nodewright}
OUT=$CACHE/bin/${PEER_NAME:-$(basename "$SRC_DIR")}
BIN=$OUT/manager
if [ -f "$OUT/.complete" ] && [ -x "$BIN" ] && [ "${PEER_REBUILD:-0}" != 1 ]; then
  echo "[peer-build] cached: $BIN" >&2
  echo "$BIN"
  exit 0
fi

JOBS=${NODEWRIGHT_BUILD_JOBS:-2}
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false -p=$JOBS"
# One build per cache directory at a time.
mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
echo "[peer-build $(date +%H:%M:%S)] building $OP_DIR/cmd/manager into $BIN (GOPROXY=$(go env GOPROXY))" >&2
start=$(date +%s)
rm -f "$OUT/.complete"
module=$(cd "$OP_DIR" && go list -m)
(cd "$OP_DIR" && go build -trimpath -ldflags="-s -w -X $module/internal/version.GIT_SHA=$(basename "$SRC_DIR")" \
  -o "$BIN.tmp" ./cmd/manager)
mv "$BIN.tmp" "$BIN"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  go version
  echo "source $SRC_DIR"
  echo "module $module"
  echo manager
} > "$OUT/.complete"
echo "[peer-build $(date +%H:%M:%S)] done in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
