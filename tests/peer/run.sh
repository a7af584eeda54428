#!/usr/bin/env bash
# Side by side: our operator and the Go operator (NVIDIA/nodewright operator/v0.15.0) on one local
# cluster, same fleet, same packages, one operator at a time (tests/scale/run.sh for each; the
# cluster and its nodes are kept between the two, each operator's objects and node keys removed).
# Prints both summary lines. Run by hand: it needs the Go source tree (tests/peer/build.sh).
#
# Usage: tests/peer/run.sh NODES PACKAGES [SRC_DIR]
# Env:   PEER_ORDER="nodewright go" (default) order of the runs; an item IMPL=BINARY runs that
#        binary (e.g. "nodewright=/tmp/before nodewright=/tmp/after go" for a same-run ratio);
#        SCALE_* as for tests/scale/run.sh
#        (SCALE_KCM_QPS, SCALE_IDLE_ONLY, SCALE_TIMEOUT, SCALE_IDLE, ...).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NODES=${1:?usage: tests/peer/run.sh NODES PACKAGES [SRC_DIR]}; PACKAGES=${2:?usage: tests/peer/run.sh NODES PACKAGES [SRC_DIR]}
# The cluster tests/scale/run.sh starts (and keeps between the runs) lives here; down.sh below
# must stop that one.
export NODEWRIGHT_RUN=${NODEWRIGHT_RUN:-/tmp/nodewright-scale}
export SCALE_GO_SRC=${3:-${SCALE_GO_SRC:-$HOME/.cache/nodewright/src/nodewright-go-v0.15.0}}
"$ROOT/tests/peer/build.sh" "$SCALE_GO_SRC" >/dev/null
first=1
lines=()
for item in ${PEER_ORDER:-nodewright go}; do
  impl=${item%%=*}; bin=""; [ "$item" = "$impl" ] || bin=${item#*=}
  reuse=1; [ "$first" = 1 ] && reuse=0
  line=$(SCALE_OPERATOR=$impl SCALE_OPERATOR_BIN=$bin SCALE_REUSE=$reuse SCALE_KEEP_CLUSTER=1 \
    "$ROOT/tests/scale/run.sh" "$NODES" "$PACKAGES" | tail -n 1 || true)
  lines+=("bin=${bin:-default} $line")
  first=0
done
# shellcheck source=../cluster/lib.sh
. "$ROOT/tests/cluster/lib.sh"
"$ROOT/tests/cluster/down.sh" >/dev/null 2>&1 || true
printf '%s\n' "${lines[@]}"
