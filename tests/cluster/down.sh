#!/usr/bin/env bash
# Stop the local control plane started by up.sh, by the pids it recorded (never by name),
# in reverse start order: kwok, kube-controller-manager, kube-apiserver, etcd.
#
# Usage: tests/cluster/down.sh [--keep-data | --purge]
#   (default)    stop, delete the etcd data (the next up.sh starts an empty cluster), keep PKI,
#                kubeconfig and logs
#   --keep-data  stop only; the next up.sh resumes the same cluster state
#   --purge      stop and delete the whole run directory ($NODEWRIGHT_RUN)
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

mode=clean
case "${1:-}" in
  "") ;;
  --keep-data) mode=keep ;;
  --purge) mode=purge ;;
  *) die "usage: down.sh [--keep-data | --purge]" ;;
esac

stop() {
  local name=$1 pid
  if ! pid=$(pid_of "$name"); then rm -f "$PIDS/$name.pid"; return; fi
  say "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    [ -d "/proc/$pid" ] || break
    sleep 0.5
  done
  if [ -d "/proc/$pid" ]; then
    say "$name did not exit after 20 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$PIDS/$name.pid"
}

if [ -d "$RUN" ]; then
  for c in kwok kube-controller-manager kube-apiserver etcd; do stop "$c"; done
  case $mode in
    clean) rm -rf "$RUN/etcd" ;;
    purge) rm -rf "$RUN" ;;
  esac
fi
say "cluster down ($mode)"
