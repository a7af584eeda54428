#!/usr/bin/env bash
# Brings up a local Kubernetes control plane (kube-apiserver, kube-controller-manager, etcd, kwok
# nodes), installs the CRDs, runs the operator and applies an example NodeWright, then shows the
# rollout until it completes. See docs/user-guide.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
missing=()
[ -x tests/cluster/up.sh ] || missing+=("tests/cluster/up.sh (local control plane)")
[ -f shell/src/bin/nodewright-operator.rs ] || missing+=("the nodewright-operator binary (shell/)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "run-local: not available yet; missing:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
exec tests/cluster/run-local-impl.sh "$@"
