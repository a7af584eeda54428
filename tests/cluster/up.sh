#!/usr/bin/env bash
# Start a real local Kubernetes control plane on 127.0.0.1 only:
#   etcd (:23790) -> kube-apiserver (https :6443) -> kube-controller-manager (:10257) + kwok (:10247)
# State, PKI, logs and pids live in ${NODEWRIGHT_RUN:-/tmp/nodewright-cluster}; the admin
# kubeconfig is $NODEWRIGHT_RUN/kubeconfig. Safe to run again while the cluster is up: components
# that are already running are left alone, missing ones are started.
#
# Usage: tests/cluster/up.sh            # logs on stderr, "export KUBECONFIG=..." on stdout
#        eval "$(tests/cluster/up.sh)"  # to use it from the current shell
# Env:   NODEWRIGHT_RUN, NODEWRIGHT_CACHE, *_PORT (see lib.sh), NODEWRIGHT_AUTO_BUILD=0 to fail
#        instead of running build.sh when binaries are missing,
#        NODEWRIGHT_KWOK_CONFIG=<extra kwok --config files, space separated>,
#        NODEWRIGHT_NODE_MONITOR_GRACE=<duration> for kube-controller-manager's
#        --node-monitor-grace-period (default 50s; applies when KCM is (re)started),
#        NODEWRIGHT_AUDIT_POLICY=<audit policy file>: the apiserver writes a JSON audit log to
#        $NODEWRIGHT_RUN/logs/audit.log (applies when the apiserver is (re)started),
#        NODEWRIGHT_APISERVER_ARGS / NODEWRIGHT_KCM_ARGS=<extra flags, space separated> for
#        kube-apiserver / kube-controller-manager (e.g. the scale harness's
#        --disable-admission-plugins=TaintNodesByCondition and --kube-api-qps=...),
#        NODEWRIGHT_KWOK_LEASE_SECONDS=<kwok --node-lease-duration-seconds> (default 40).
set -euo pipefail
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

for t in curl openssl base64; do command -v "$t" >/dev/null || die "$t not found"; done

# --- binaries -------------------------------------------------------------------------------
need_build=0
for b in "$K8S_BIN/kube-apiserver" "$K8S_BIN/kube-controller-manager" "$KUBECTL" \
         "$ETCD_BIN/etcd" "$KWOK_BIN/kwok" "$KWOK_BIN/stages/node-initialize.yaml"; do
  [ -e "$b" ] || need_build=1
done
if [ $need_build = 1 ]; then
  [ "${NODEWRIGHT_AUTO_BUILD:-1}" != 0 ] || die "binaries missing under $NODEWRIGHT_CACHE/bin: run tests/cluster/build.sh"
  say "binaries missing; running build.sh core (the first build takes a long time)"
  "$CLUSTER_DIR/build.sh" core >&2
fi

mkdir -p "$RUN" "$LOGS" "$PIDS"

# --- PKI and kubeconfig (spec 08 §3) -----------------------------------------------------------
gen_pki() {
  local tmp; tmp=$(mktemp -d "$RUN/pki.XXXXXX")
  (
    cd "$tmp"
    cat > openssl.cnf <<'EOF'
[req]
distinguished_name = req
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
[v3_webhook]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
EOF
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=nodewright-test-ca" \
      -config openssl.cnf -extensions v3_ca -out ca.crt
    leaf() { # name subject extension-section
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" -config openssl.cnf -out "$1.csr"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
        -extfile openssl.cnf -extensions "$3" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr"
    }
    leaf apiserver "/CN=kube-apiserver"                    v3_server
    leaf admin     "/O=system:masters/CN=nodewright-admin" v3_client
    leaf webhook   "/CN=nodewright-webhook"                v3_webhook
    # Front-proxy (request-header) CA: the apiserver publishes it in
    # kube-system/extension-apiserver-authentication; without it kube-controller-manager's
    # delegated authentication logs "missing content for CA bundle" errors forever.
    openssl genrsa -out front-proxy-ca.key 2048 2>/dev/null
    openssl req -x509 -new -key front-proxy-ca.key -sha256 -days 3650 -subj "/CN=nodewright-front-proxy-ca" \
      -config openssl.cnf -extensions v3_ca -out front-proxy-ca.crt
    openssl genrsa -out front-proxy-client.key 2048 2>/dev/null
    openssl req -new -key front-proxy-client.key -subj "/CN=front-proxy-client" -config openssl.cnf -out fp.csr
    openssl x509 -req -in fp.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial -days 3650 \
      -sha256 -extfile openssl.cnf -extensions v3_client -out front-proxy-client.crt 2>/dev/null
    rm -f fp.csr
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 600 ./*.key
  )
  rm -rf "$PKI"; mv "$tmp" "$PKI"
}

write_kubeconfig() {
  local b64ca b64crt b64key
  b64ca=$(base64 -w0 < "$PKI/ca.crt"); b64crt=$(base64 -w0 < "$PKI/admin.crt"); b64key=$(base64 -w0 < "$PKI/admin.key")
  cat > "$KUBECONFIG_PATH.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nodewright-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $b64ca
users:
- name: nodewright-admin
  user:
    client-certificate-data: $b64crt
    client-key-data: $b64key
contexts:
- name: nodewright-local
  context: {cluster: nodewright-local, user: nodewright-admin}
current-context: nodewright-local
EOF
  chmod 600 "$KUBECONFIG_PATH.tmp"; mv "$KUBECONFIG_PATH.tmp" "$KUBECONFIG_PATH"
}

if [ ! -f "$PKI/sa.pub" ] || [ ! -f "$PKI/webhook.crt" ] || [ ! -f "$PKI/front-proxy-client.crt" ]; then
  pid_of kube-apiserver >/dev/null && die "PKI in $PKI is incomplete but kube-apiserver runs: run down.sh --purge first"
  say "generating PKI in $PKI"
  gen_pki
fi
if [ ! -f "$KUBECONFIG_PATH" ] || [ "$PKI/admin.crt" -nt "$KUBECONFIG_PATH" ] \
   || ! grep -q "127.0.0.1:$APISERVER_PORT" "$KUBECONFIG_PATH"; then
  write_kubeconfig
fi

# --- process management ------------------------------------------------------------------------
# start NAME READY_FN TIMEOUT PORT... -- COMMAND...
start() {
  local name=$1 ready=$2 timeout=$3; shift 3
  local ports=() pid
  while [ "$1" != -- ]; do ports+=("$1"); shift; done; shift
  if pid=$(pid_of "$name"); then
    if "$ready" >/dev/null 2>&1; then say "$name already running (pid $pid)"; return; fi
    say "$name running (pid $pid) but not ready yet; waiting"
  else
    local p
    for p in "${ports[@]}"; do
      port_busy "$p" && die "port 127.0.0.1:$p is in use by another process (not started by up.sh); free it or choose other ports (ETCD_PORT, ETCD_PEER_PORT, APISERVER_PORT, KCM_PORT, KWOK_PORT)"
    done
    say "starting $name (log: $LOGS/$name.log)"
    # setsid: own session, so terminal signals to the caller do not reach the component.
    setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
    echo $! > "$PIDS/$name.pid"
  fi
  if ! wait_for "$timeout" "$name readiness" "$ready"; then
    tail -n 30 "$LOGS/$name.log" >&2 || true
    die "$name did not become ready (log: $LOGS/$name.log)"
  fi
  pid_of "$name" >/dev/null || { tail -n 30 "$LOGS/$name.log" >&2; die "$name exited (log: $LOGS/$name.log)"; }
  say "$name ready"
}

# 1. etcd (spec 08 §2.1)
start etcd etcd_ready 60 "$ETCD_PORT" "$ETCD_PEER_PORT" -- \
  "$ETCD_BIN/etcd" --name=nodewright --data-dir="$RUN/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="nodewright=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync=true --quota-backend-bytes=4294967296 --log-level=warn

# 2. kube-apiserver (spec 08 §4)
audit_args=()
if [ -n "${NODEWRIGHT_AUDIT_POLICY:-}" ]; then
  [ -f "$NODEWRIGHT_AUDIT_POLICY" ] || die "NODEWRIGHT_AUDIT_POLICY=$NODEWRIGHT_AUDIT_POLICY: no such file"
  audit_args=(--audit-policy-file="$NODEWRIGHT_AUDIT_POLICY" --audit-log-path="$LOGS/audit.log"
              --audit-log-format=json --audit-log-mode=blocking --audit-log-maxsize=0)
fi
start kube-apiserver apiserver_ready 180 "$APISERVER_PORT" -- \
  "$K8S_BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --endpoint-reconciler-type=none \
  --cert-dir="$RUN/apiserver" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
  --proxy-client-key-file="$PKI/front-proxy-client.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --authorization-mode=RBAC \
  --allow-privileged=true \
  --profiling=false --v=1 "${audit_args[@]}" ${NODEWRIGHT_APISERVER_ARGS:-}

# 3. kube-controller-manager (spec 08 §5): real Job, TTL, GC, pod-GC, node-lifecycle controllers.
start kube-controller-manager kcm_ready 120 "$KCM_PORT" -- \
  "$K8S_BIN/kube-controller-manager" \
  --kubeconfig="$KUBECONFIG_PATH" \
  --authentication-kubeconfig="$KUBECONFIG_PATH" \
  --authorization-kubeconfig="$KUBECONFIG_PATH" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
  --leader-elect=false \
  --use-service-account-credentials=false \
  --controllers='*' \
  --root-ca-file="$PKI/ca.crt" \
  --service-account-private-key-file="$PKI/sa.key" \
  --node-monitor-period=5s \
  ${NODEWRIGHT_NODE_MONITOR_GRACE:+--node-monitor-grace-period=$NODEWRIGHT_NODE_MONITOR_GRACE} \
  --terminated-pod-gc-threshold=12500 \
  --v=1 ${NODEWRIGHT_KCM_ARGS:-}

# 4. kwok (spec 08 §6): fake kubelets for Nodes annotated kwok.x-k8s.io/node=fake.
# --node-port: the kubelet port the Nodes advertise, so the apiserver reaches kwok for pod logs.
kwok_cfg=(
  --config="$KWOK_BIN/stages/node-initialize.yaml"
  --config="$KWOK_BIN/stages/node-heartbeat-with-lease.yaml"
  --config="$CLUSTER_DIR/kwok/pod-stages.yaml"
)
for extra in ${NODEWRIGHT_KWOK_CONFIG:-}; do kwok_cfg+=(--config="$extra"); done
start kwok kwok_ready 60 "$KWOK_PORT" -- \
  "$KWOK_BIN/kwok" \
  --kubeconfig="$KUBECONFIG_PATH" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 \
  --cidr=10.244.0.0/16 \
  --node-lease-duration-seconds="${NODEWRIGHT_KWOK_LEASE_SECONDS:-40}" \
  --server-address="127.0.0.1:$KWOK_PORT" \
  --node-port="$KWOK_PORT" \
  "${kwok_cfg[@]}"

# The serviceaccount controller must have created default/default before pods can be admitted.
wait_for 60 "ServiceAccount default/default" kc -n default get serviceaccount default \
  || die "ServiceAccount default/default missing (log: $LOGS/kube-controller-manager.log)"

say "cluster up: $(kc version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1) on https://127.0.0.1:$APISERVER_PORT; logs in $LOGS"
echo "export KUBECONFIG=$KUBECONFIG_PATH"
