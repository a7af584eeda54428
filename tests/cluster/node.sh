#!/usr/bin/env bash
# Power a kwok fake Node down/up, or reboot it (new status.nodeInfo.bootID).
#
# Usage: tests/cluster/node.sh down   NODE [--wait]   # kwok stops heartbeating and driving NODE and its pods;
#                                                     # --wait: until node-lifecycle marks it Ready=Unknown
#                                                     # (node.kubernetes.io/unreachable taint), ~60 s by default
#        tests/cluster/node.sh up     NODE            # kwok takes NODE back; waits until Ready and untainted
#        tests/cluster/node.sh reboot NODE [--wait]   # down [--wait], new bootID, up; prints the new bootID
#
# How: kwok (v0.8) manages a node only while it holds the node's Lease. "down" hands the Lease to a
# foreign holder with a long duration (kwok then treats the node and its pods as read-only and stops
# renewing); "up" deletes the Lease, kwok recreates it within ~10 s and re-initialises the node.
# (Removing the kwok.x-k8s.io/node annotation does NOT work: kwok v0.8 filters node events on the
# client side and never notices that a node left its selector, so it keeps renewing the Lease.)
# The grace period before Unknown is kube-controller-manager's --node-monitor-grace-period
# (default 50 s); up.sh sets it from NODEWRIGHT_NODE_MONITOR_GRACE when given (keep it >= 30s).
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

cmd=${1:-}; node=${2:-}; wait=0
[ "${3:-}" = --wait ] && wait=1
if [ -z "$cmd" ] || [ -z "$node" ]; then die "usage: node.sh down|up|reboot NODE [--wait]"; fi
kc get node "$node" >/dev/null || die "no node $node"

ready_status() { kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }

down() {
  kc -n kube-node-lease get lease "$node" >/dev/null 2>&1 \
    || die "node $node has no Lease in kube-node-lease (is it a kwok node and kwok running?)"
  kc -n kube-node-lease patch lease "$node" --type=merge \
    -p '{"spec":{"holderIdentity":"nodewright-e2e-down","leaseDurationSeconds":86400}}' >/dev/null
  say "node $node down (Lease taken from kwok)"
  if [ $wait = 1 ]; then
    wait_for 240 "node $node Ready=Unknown" bash -c "[ \"\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' get node '$node' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = Unknown ]" \
      || die "node $node did not become Unknown"
    say "node $node Ready=$(ready_status)"
  fi
}

up() {
  kc -n kube-node-lease delete lease "$node" --ignore-not-found >/dev/null
  wait_for 120 "node $node Ready and untainted" bash -c "
    out=\$('$KUBECTL' --kubeconfig='$KUBECONFIG_PATH' get node '$node' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}|{.spec.taints[*].key}')
    [ \"\${out%%|*}\" = True ] && [[ \"\${out#*|}\" != *node.kubernetes.io/not-ready* ]] && [[ \"\${out#*|}\" != *node.kubernetes.io/unreachable* ]]" \
    || die "node $node did not come back (log: $LOGS/kwok.log)"
  say "node $node up"
}

case $cmd in
  down) down ;;
  up) up ;;
  reboot)
    down
    boot=$(cat /proc/sys/kernel/random/uuid)
    kc patch node "$node" --subresource=status --type=merge \
      -p "{\"status\":{\"nodeInfo\":{\"bootID\":\"$boot\"}}}" >/dev/null
    up
    say "node $node rebooted, bootID $boot"
    echo "$boot" ;;
  *) die "usage: node.sh down|up|reboot NODE [--wait]" ;;
esac
