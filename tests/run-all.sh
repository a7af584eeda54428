#!/usr/bin/env bash
# Runs every test of the project: formatting, lints, unit/property/golden tests, CRD freshness,
# core purity, and (when the local control plane is available) the end-to-end suite.
#
# Usage: tests/run-all.sh            # everything
#        NODEWRIGHT_SKIP_E2E=1 tests/run-all.sh   # skip the real-cluster suite (and the Helm
#                                                 # checks that need a cluster)
#        NODEWRIGHT_SKIP_HELM=1 tests/run-all.sh  # skip the Helm chart checks
#        NODEWRIGHT_SKIP_PROMTOOL=1 tests/run-all.sh  # skip promtool on the alerting rules (its
#                                                     # first run builds promtool, ~3 min)
#        NODEWRIGHT_SKIP_IMAGE=1 tests/run-all.sh # skip the operator image build and check
#        NODEWRIGHT_SKIP_HELM_LIFECYCLE=1 tests/run-all.sh  # skip tests/helm/lifecycle.sh
#        NODEWRIGHT_SKIP_SCALE=1 tests/run-all.sh # skip the 50-node scale harness smoke
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "core purity: no I/O crates in nodewright-core"
if cargo tree -p nodewright-core -e normal --prefix none | grep -E '^(tokio|hyper|reqwest|kube-client|kube-runtime|rustls) ' ; then
  echo "nodewright-core depends on an I/O crate (see above)" >&2
  exit 1
fi

step "CRDs in chart/files/crds are up to date"
cargo run -q -p nodewright-crds --bin crdgen -- --check

step "cargo test --workspace"
cargo test --workspace

if [ "${NODEWRIGHT_SKIP_IMAGE:-0}" != 1 ]; then
  step "operator image: static binary, daemonless build, entrypoint in an isolated root (tests/image)"
  tests/image/build.sh
  if [ "${NODEWRIGHT_SKIP_E2E:-0}" = 1 ]; then
    tests/image/check.sh
  else
    tests/image/check.sh --with-cluster
  fi
fi

if [ "${NODEWRIGHT_SKIP_HELM:-0}" != 1 ]; then
  step "Helm chart: lint, golden renders, refused values, server-side dry-run, CRD upgrade"
  if [ "${NODEWRIGHT_SKIP_E2E:-0}" = 1 ]; then
    NODEWRIGHT_HELM_CLUSTER=0 tests/helm/render.sh
  else
    tests/helm/render.sh
  fi
fi

if [ "${NODEWRIGHT_SKIP_E2E:-0}" != 1 ]; then
  step "local control plane smoke test (real kube-apiserver, Job controller, kwok)"
  tests/cluster/smoke.sh
  if [ -x tests/e2e/run.sh ]; then
    step "end-to-end suite against a real kube-apiserver"
    tests/e2e/run.sh
  fi
  if [ "${NODEWRIGHT_SKIP_SCALE:-0}" != 1 ]; then
    step "scale harness smoke: 50 kwok nodes x 2 packages (tests/scale/run.sh, debug operator)"
    cargo build -q -p nodewright-shell --bin nodewright-operator
    SCALE_SMOKE=1 SCALE_PERCENT=50 SCALE_IDLE=6 SCALE_TIMEOUT=150 NODEWRIGHT_RUN=/tmp/nodewright-scale-smoke \
      SCALE_OPERATOR_BIN="$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug/nodewright-operator" \
      tests/scale/run.sh 50 2
  fi
  if [ "${NODEWRIGHT_SKIP_HELM_LIFECYCLE:-0}" != 1 ]; then
    step "Helm lifecycle: install, certificate rotation, rollout as the chart's ServiceAccount, metrics auth, upgrade, rollback, uninstall, RBAC vs audit log"
    tests/helm/lifecycle.sh
  fi
fi
