# Settings of the e2e cluster instance (sourced by tests/e2e/*.sh). Its own run directory and
# loopback ports, so it never collides with the default instance of tests/cluster/up.sh (which
# tests/run-local.sh and developers use) or with an operator someone else runs against it.
# shellcheck shell=bash disable=SC2034  # variables for the scripts that source this file
: "${NODEWRIGHT_RUN:=/tmp/nodewright-e2e}"
: "${ETCD_PORT:=24790}"
: "${ETCD_PEER_PORT:=24800}"
: "${APISERVER_PORT:=7443}"
: "${KCM_PORT:=11257}"
: "${KWOK_PORT:=11247}"
# The operator under test: probe port (/healthz, /readyz) and webhook port, both on 127.0.0.1.
: "${E2E_PROBE_PORT:=18091}"
: "${E2E_WEBHOOK_PORT:=9444}"
# /metrics of the operator under test (plain HTTP on 127.0.0.1); the monitoring test scrapes it.
: "${E2E_METRICS_PORT:=$((E2E_PROBE_PORT + 10))}"
export NODEWRIGHT_RUN ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT KWOK_PORT E2E_PROBE_PORT E2E_WEBHOOK_PORT E2E_METRICS_PORT
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$E2E_DIR/../.." && pwd)
export KUBECONFIG=$NODEWRIGHT_RUN/kubeconfig
OPERATOR_ENV=$NODEWRIGHT_RUN/operator.env
OPERATOR_PID=$NODEWRIGHT_RUN/pids/nodewright-operator.pid
OPERATOR_LOG=$NODEWRIGHT_RUN/logs/nodewright-operator.log
e2e_say() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
