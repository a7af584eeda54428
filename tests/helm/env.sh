# Settings of the Helm tests' cluster instance (sourced by tests/helm/*.sh before
# tests/cluster/lib.sh): its own run directory and loopback ports, so it never collides with the
# default instance of tests/cluster/up.sh or with the e2e instance (tests/e2e/env.sh).
# shellcheck shell=bash
: "${NODEWRIGHT_RUN:=/tmp/nodewright-helm}"
: "${ETCD_PORT:=25790}"
: "${ETCD_PEER_PORT:=25800}"
: "${APISERVER_PORT:=25443}"
: "${KCM_PORT:=12257}"
: "${KWOK_PORT:=12247}"
export NODEWRIGHT_RUN ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT KWOK_PORT
