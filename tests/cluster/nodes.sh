#!/usr/bin/env bash
# Create N kwok fake Nodes <prefix>-0 .. <prefix>-(N-1) in the local cluster (up.sh must have run)
# and wait until each is Ready, has no node.kubernetes.io/not-ready taint and carries a boot id in
# status.nodeInfo.bootID. Existing nodes of the same name are kept as they are (idempotent).
# Prints the node names, one per line, on stdout.
#
# Usage: tests/cluster/nodes.sh N [prefix]          (prefix defaults to "kwok-node")
# Env:   NODEWRIGHT_NODE_LABELS="k1=v1,k2=v2"  extra labels on the new nodes
#        NODEWRIGHT_NODE_TIMEOUT=120           seconds to wait for readiness
#
# A node is managed by kwok because of its annotation kwok.x-k8s.io/node=fake. To take a node
# down, bring it back or reboot it (new bootID), use node.sh.
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

n=${1:-}; prefix=${2:-kwok-node}
[[ "$n" =~ ^[0-9]+$ ]] || die "usage: nodes.sh N [prefix]"
[ -f "$KUBECONFIG_PATH" ] || die "no kubeconfig at $KUBECONFIG_PATH: run up.sh first"
apiserver_ready || die "kube-apiserver is not ready: run up.sh first"
kwok_ready || die "kwok is not running: run up.sh first"

extra_labels=""
IFS=',' read -r -a kvs <<< "${NODEWRIGHT_NODE_LABELS:-}"
for kv in "${kvs[@]}"; do
  [ -n "$kv" ] || continue
  [[ "$kv" == *=* ]] || die "bad label '$kv' in NODEWRIGHT_NODE_LABELS (want k=v)"
  extra_labels+="    \"${kv%%=*}\": \"${kv#*=}\""$'\n'
done

new_boot_id() { cat /proc/sys/kernel/random/uuid; }

names=()
for ((i = 0; i < n; i++)); do
  name="$prefix-$i"; names+=("$name")
  if kc get node "$name" >/dev/null 2>&1; then say "node $name exists"; continue; fi
  boot=$(new_boot_id)
  kc create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    nodewright.test/fake: "true"
$extra_labels
spec: {}
status:
  nodeInfo:
    bootID: $boot
    machineID: $(new_boot_id | tr -d -)
    systemUUID: $(new_boot_id)
    architecture: amd64
    operatingSystem: linux
    osImage: kwok fake node
EOF
  say "node $name created (bootID $boot)"
done

node_ok() { # name: Ready=True, no not-ready taint, non-empty bootID
  local out
  out=$(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}|{.spec.taints[*].key}|{.status.nodeInfo.bootID}') || return 1
  local ready=${out%%|*} rest=${out#*|}
  local taints=${rest%%|*} boot=${rest#*|}
  [ "$ready" = True ] && [[ "$taints" != *node.kubernetes.io/not-ready* ]] && [ -n "$boot" ]
}

timeout=${NODEWRIGHT_NODE_TIMEOUT:-120}
for name in "${names[@]}"; do
  deadline=$(( $(date +%s) + timeout ))
  until node_ok "$name"; do
    # kwok's node-initialize keeps an existing bootID, but a create that dropped status (or a
    # racing first status write) can leave it empty: set one through the status subresource.
    if [ -z "$(kc get node "$name" -o jsonpath='{.status.nodeInfo.bootID}' 2>/dev/null)" ]; then
      kc patch node "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"nodeInfo\":{\"bootID\":\"$(new_boot_id)\"}}}" >/dev/null 2>&1 || true
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kc get node "$name" -o yaml >&2 || true
      die "node $name not Ready/untainted after ${timeout}s (logs: $LOGS/kwok.log, $LOGS/kube-controller-manager.log)"
    fi
    sleep 0.5
  done
done
say "${#names[@]} node(s) ready: ${names[*]}"
printf '%s\n' "${names[@]}"
