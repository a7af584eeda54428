#!/usr/bin/env bash
# Builds the operator image's binary: nodewright-operator, fully static (glibc linked in with
# `-C target-feature=+crt-static`), rustls only (no OpenSSL), cargo profile `image`.
# The Containerfile's build stage runs this same script, so both recipes ship the same binary.
#
# Usage: tests/image/binary.sh [OUT_FILE]
#   Prints the path of the binary on stdout (OUT_FILE when given, a copy of cargo's output).
# Env:   NODEWRIGHT_IMAGE_TARGET_DIR  cargo target dir (default $NODEWRIGHT_CACHE/target-image, kept
#                                     apart from the debug target dir so that neither invalidates the other)
#        NODEWRIGHT_IMAGE_TRIPLE      target triple (default <uname -m>-unknown-linux-gnu)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
: "${NODEWRIGHT_CACHE:=${HOME:-/root}/.cache/nodewright}"
TARGET_DIR=${NODEWRIGHT_IMAGE_TARGET_DIR:-$NODEWRIGHT_CACHE/target-image}
TRIPLE=${NODEWRIGHT_IMAGE_TRIPLE:-$(uname -m)-unknown-linux-gnu}
OUT=${1:-}

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# No OpenSSL anywhere in what the operator links (TLS is rustls + ring).
tls=$(cargo tree --locked -p nodewright-shell -e normal,build --target "$TRIPLE" --prefix none \
        --format '{p}' | awk '{print $1}' | sort -u | grep -E '^(openssl|openssl-sys|native-tls)$' || true)
[ -z "$tls" ] || die "nodewright-shell depends on OpenSSL: $tls (cargo tree -i $tls)"

start=$(date +%s)
log "cargo build --profile image --target $TRIPLE (target dir $TARGET_DIR)"
# RUSTFLAGS apply to the target only (--target is explicit): build scripts stay dynamic host binaries.
# getrandom 0.3/0.4 find libc's getrandom() with dlsym, which a static binary cannot, and then fall
# back to /dev/urandom, which an empty image does not have (tests/image/check.sh --with-cluster
# caught the resulting panic): call getrandom() directly.
RUSTFLAGS='-C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"' \
CARGO_TARGET_DIR="$TARGET_DIR" \
  cargo build --locked --profile image --target "$TRIPLE" -p nodewright-shell --bin nodewright-operator
bin=$TARGET_DIR/$TRIPLE/image/nodewright-operator
log "built in $(( $(date +%s) - start ))s: $bin ($(stat -c %s "$bin") bytes)"

# Static: no program interpreter, no shared libraries.
if command -v readelf >/dev/null; then
  ! readelf -l "$bin" | grep -q 'INTERP' || die "$bin has a program interpreter (not static)"
  ! readelf -d "$bin" 2>/dev/null | grep -q 'NEEDED' || die "$bin needs shared libraries: $(readelf -d "$bin" | grep NEEDED)"
fi

if [ -n "$OUT" ]; then
  mkdir -p "$(dirname "$OUT")"
  cp "$bin" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
  bin=$OUT
fi
echo "$bin"
