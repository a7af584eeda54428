#!/usr/bin/env bash
# Print shell exports for the local cluster's tools: KUBECONFIG, and PATH with the cached
# kubectl, helm, chainsaw, kwok, etcd binaries in front. Usage: eval "$(tests/cluster/env.sh)"
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
echo "export KUBECONFIG=$KUBECONFIG_PATH"
echo "export PATH=$K8S_BIN:$HELM_BIN:$CHAINSAW_BIN:$KWOK_BIN:$ETCD_BIN:\$PATH"
