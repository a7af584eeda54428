# Shared helpers for tests/cluster/*.sh (sourced, not executed).
# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing scripts
CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
. "$CLUSTER_DIR/versions.env"

# Loopback ports (override from the environment if they clash with something else).
: "${ETCD_PORT:=23790}"
: "${ETCD_PEER_PORT:=23800}"
: "${APISERVER_PORT:=6443}"
: "${KCM_PORT:=10257}"
: "${KWOK_PORT:=10247}"
export ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT KWOK_PORT

RUN=$NODEWRIGHT_RUN
PKI=$RUN/pki
LOGS=$RUN/logs
PIDS=$RUN/pids
KUBECONFIG_PATH=$RUN/kubeconfig
KUBECTL=$K8S_BIN/kubectl

say() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# kubectl against the local cluster.
kc() { "$KUBECTL" --kubeconfig="$KUBECONFIG_PATH" "$@"; }

# pid_of NAME: the pid recorded for NAME if that process is alive and still runs our binary.
pid_of() {
  local f="$PIDS/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  # guard against pid reuse: the command line must name the component
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1" || return 1
  echo "$pid"
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.5 s.
wait_for() {
  local timeout=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      say "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# port_busy PORT: something listens on 127.0.0.1:PORT (or on all addresses).
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

etcd_ready()      { curl -fsS "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
apiserver_ready() { [ "$(curl -fsS --cacert "$PKI/ca.crt" "https://127.0.0.1:$APISERVER_PORT/readyz")" = ok ]; }
kcm_ready()       { [ "$(curl -fsSk "https://127.0.0.1:$KCM_PORT/healthz")" = ok ]; }
kwok_ready()      { [ "$(curl -fsS "http://127.0.0.1:$KWOK_PORT/healthz")" = ok ]; }
