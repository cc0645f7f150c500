#!/usr/bin/env bash
# Reference start recipe + smoke check for the loopback control plane (what a Rust harness
# should reproduce). Starts etcd, kube-apiserver and kube-scheduler from a build.sh cache dir on
# free 127.0.0.1 ports in a temp dir, checks scheduling of GPU pods and CRD establishment, prints
# timings, and stops everything on exit.
#
#   tests/cluster/smoke.sh [CP_DIR]        # CP_DIR defaults to the output of build.sh
#   KGPU_SMOKE_KEEP=1 tests/cluster/smoke.sh   # leave it running until <dir>/stop exists
#   KGPU_SMOKE_KUEUE=1 tests/cluster/smoke.sh  # also run the Kueue manager (needs bin/kueue and root)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CP=${1:-$(KGPU_CP_WITH_KUEUE=${KGPU_CP_WITH_KUEUE:-${KGPU_SMOKE_KUEUE:-0}} "$HERE/build.sh" | tail -n1)}
BIN=$CP/bin
D=$(mktemp -d /tmp/kgpu-cp.XXXXXX)
PIDS=()

log() { echo "smoke: $*" >&2; }
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }

cleanup() {
  # Reverse start order (scheduler, apiserver, etcd), each: SIGTERM to its process group, wait up
  # to 10 s, then SIGKILL. Stopping etcd before the apiserver has exited makes it hang on retries.
  local i p t
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[i]} t=$(now)
    kill -TERM -- "-$p" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null && log "pid $p needed SIGKILL"
    wait "$p" 2>/dev/null || true
    log "stopped pid $p in $(since "$t")s"
  done
  if [ "${CREATED_ETC_KUEUE:-0}" = 1 ]; then rm -rf /etc/kueue; fi
  [ "${KGPU_SMOKE_KEEP_DIR:-0}" = 1 ] || rm -rf "$D"
}
trap cleanup EXIT

# Start a command in its own process group (setsid), logging to $D/<name>.log.
start() { # name cmd...
  local name=$1; shift
  setsid "$@" >"$D/$name.log" 2>&1 &
  PIDS+=($!)
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
EC=$(free_port); EP=$(free_port); AP=$(free_port); SP=$(free_port)
TOKEN=$(openssl rand -hex 16)

# ---- files -------------------------------------------------------------------------------
mkdir -p "$D/pki"
mkdir -m 700 "$D/etcd"
openssl genrsa -out "$D/sa.key" 2048 2>/dev/null
echo "$TOKEN,admin,admin-uid,system:masters" >"$D/tokens.csv"
cat >"$D/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kgpu
  cluster:
    server: https://127.0.0.1:$AP
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $TOKEN
contexts:
- name: kgpu
  context:
    cluster: kgpu
    user: admin
current-context: kgpu
EOF
cat >"$D/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $D/admin.kubeconfig
leaderElection:
  leaderElect: false
EOF

# ---- etcd --------------------------------------------------------------------------------
T0=$(now)
start etcd "$BIN/etcd" --name=kgpu --data-dir="$D/etcd" \
  --listen-client-urls="http://127.0.0.1:$EC" --advertise-client-urls="http://127.0.0.1:$EC" \
  --listen-peer-urls="http://127.0.0.1:$EP" --initial-advertise-peer-urls="http://127.0.0.1:$EP" \
  --initial-cluster="kgpu=http://127.0.0.1:$EP" \
  --unsafe-no-fsync=true --log-level=warn --quota-backend-bytes=4294967296
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$EC/health" 2>/dev/null | grep -q '"health":"true"' && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$EC/health" | grep -q '"health":"true"' || { cat "$D/etcd.log"; fail "etcd not healthy"; }
T_ETCD=$(since "$T0")
log "etcd healthy after ${T_ETCD}s (client port $EC)"

# ---- kube-apiserver ----------------------------------------------------------------------
T1=$(now)
start apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$EC" \
  --bind-address=127.0.0.1 --secure-port="$AP" --advertise-address=127.0.0.1 \
  --cert-dir="$D/pki" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --service-account-issuer="https://127.0.0.1:$AP" \
  --service-account-key-file="$D/sa.key" --service-account-signing-key-file="$D/sa.key" \
  --token-auth-file="$D/tokens.csv" \
  --authorization-mode=RBAC \
  --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
  --allow-privileged=true \
  --enable-priority-and-fairness=false \
  --endpoint-reconciler-type=none
K() { curl -sk -H "Authorization: Bearer $TOKEN" "$@"; }
API="https://127.0.0.1:$AP"
code=
for _ in $(seq 1 900); do
  code=$(curl -sk -o /dev/null -w '%{http_code}' "$API/readyz" || true)
  [ "$code" = 200 ] && break
  kill -0 "${PIDS[1]}" 2>/dev/null || { tail -30 "$D/apiserver.log"; fail "kube-apiserver exited"; }
  sleep 0.1
done
[ "$code" = 200 ] || { tail -30 "$D/apiserver.log"; fail "apiserver /readyz = $code"; }
T_API=$(since "$T1")
log "apiserver /readyz 200 after ${T_API}s (${T_API}s from apiserver start, $(since "$T0")s from etcd start; port $AP)"
for _ in $(seq 1 100); do K -f "$API/api/v1/namespaces/default" >/dev/null 2>&1 && break; sleep 0.1; done
K -f "$API/api/v1/namespaces/default" >/dev/null || fail "namespace default missing"
log "version: $(K "$API/version" | jq -c '{gitVersion,major,minor}')"

# ---- kube-scheduler ----------------------------------------------------------------------
T2=$(now)
start scheduler "$BIN/kube-scheduler" --config="$D/scheduler.yaml" \
  --bind-address=127.0.0.1 --secure-port="$SP"
for _ in $(seq 1 600); do
  [ "$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$SP/readyz" || true)" = 200 ] && break
  kill -0 "${PIDS[2]}" 2>/dev/null || { tail -30 "$D/scheduler.log"; fail "kube-scheduler exited"; }
  sleep 0.1
done
log "scheduler /readyz 200 after $(since "$T2")s (port $SP)"

# ---- node with 4 GPUs --------------------------------------------------------------------
RES='{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"4"}'
K -f -X POST -H 'Content-Type: application/json' "$API/api/v1/nodes" \
  -d '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-node-1","labels":{"kubernetes.io/hostname":"gpu-node-1","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}}}' >/dev/null ||
  fail "create node"
K -f -X PATCH -H 'Content-Type: application/merge-patch+json' "$API/api/v1/nodes/gpu-node-1/status" \
  -d "{\"status\":{\"capacity\":$RES,\"allocatable\":$RES,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"fake\",\"lastHeartbeatTime\":\"$(date -u +%FT%TZ)\",\"lastTransitionTime\":\"$(date -u +%FT%TZ)\"}]}}" >/dev/null ||
  fail "patch node status"
log "node: $(K "$API/api/v1/nodes/gpu-node-1" | jq -c '{alloc: .status.allocatable, taints: .spec.taints}')"

pod() { # name gpus
  K -f -X POST -H 'Content-Type: application/json' "$API/api/v1/namespaces/default/pods" -d "{
    \"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\"},
    \"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"example.invalid/cuda:1\",
      \"resources\":{\"limits\":{\"nvidia.com/gpu\":\"$2\"}}}]}}" >/dev/null || fail "create pod $1"
}
pod gpu2 2
pod gpu8 8
NODE=
for _ in $(seq 1 300); do
  NODE=$(K "$API/api/v1/namespaces/default/pods/gpu2" | jq -r '.spec.nodeName // empty')
  [ -n "$NODE" ] && break
  sleep 0.1
done
[ "$NODE" = gpu-node-1 ] || fail "pod gpu2 not bound (nodeName='$NODE')"
log "pod gpu2 (2 GPUs) bound to $NODE"
MSG=
for _ in $(seq 1 300); do
  MSG=$(K "$API/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=gpu8,reason=FailedScheduling" |
    jq -r '.items[0].message // empty')
  [ -n "$MSG" ] && break
  sleep 0.1
done
[ -n "$MSG" ] || fail "no FailedScheduling event for gpu8"
log "pod gpu8 (8 GPUs) FailedScheduling: $MSG"
log "pod gpu8 condition: $(K "$API/api/v1/namespaces/default/pods/gpu8" | jq -c '.status.conditions')"

# ---- CRDs (server-side apply) --------------------------------------------------------------
T3=$(now)
NAMES=()
for f in "$CP"/crds/kueue/*.yaml "$CP"/crds/volcano/*.yaml; do
  name=$(awk '/^  name: /{print $2; exit}' "$f")
  out=$(K -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$f" \
    -w '\n%{http_code}' "$API/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name?fieldManager=kgpu&force=true")
  code=$(echo "$out" | tail -n1)
  [ "$code" = 200 ] || [ "$code" = 201 ] || { echo "$out" | head -c 600 >&2; fail "apply $name: HTTP $code"; }
  NAMES+=("$name")
done
for name in "${NAMES[@]}"; do
  st=
  for _ in $(seq 1 300); do
    st=$(K "$API/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name" |
      jq -r '.status.conditions[]? | select(.type=="Established") | .status')
    [ "$st" = True ] && break
    sleep 0.1
  done
  [ "$st" = True ] || fail "CRD $name not Established"
done
log "${#NAMES[@]} CRDs applied and Established in $(since "$T3")s"
# A Kueue v1beta2 ResourceFlavor and a Volcano Queue can be created.
K -f -X POST -H 'Content-Type: application/json' "$API/apis/kueue.x-k8s.io/v1beta2/resourceflavors" \
  -d '{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ResourceFlavor","metadata":{"name":"h100"}}' >/dev/null ||
  fail "create ResourceFlavor"
K -f -X POST -H 'Content-Type: application/json' "$API/apis/scheduling.volcano.sh/v1beta1/queues" \
  -d '{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"Queue","metadata":{"name":"research"},"spec":{"weight":1}}' >/dev/null ||
  fail "create volcano Queue"
log "created kueue ResourceFlavor h100 and volcano Queue research"

# ---- optional: the real Kueue manager, out of cluster ----------------------------------------
# Needs bin/kueue (KGPU_CP_WITH_KUEUE=1 build.sh) and root: Kueue v0.17.0 hard-codes its metrics
# certificate path /etc/kueue/metrics/certs/tls.{crt,key} when internalCertManagement is off.
if [ "${KGPU_SMOKE_KUEUE:-0}" = 1 ]; then
  [ -x "$BIN/kueue" ] || fail "KGPU_SMOKE_KUEUE=1 but $BIN/kueue is missing (run KGPU_CP_WITH_KUEUE=1 build.sh)"
  KH=$(free_port); KM=$(free_port); KW=$(free_port)
  selfsigned() {
    mkdir -p "$1" && openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/tls.key" -out "$1/tls.crt" \
      -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
  }
  selfsigned "$D/kueue-webhook"
  if [ ! -f /etc/kueue/metrics/certs/tls.crt ]; then
    [ -d /etc/kueue ] || CREATED_ETC_KUEUE=1
    selfsigned /etc/kueue/metrics/certs || fail "cannot write /etc/kueue/metrics/certs (Kueue v0.17.0 needs it; run as root)"
  fi
  K -f -X POST -H 'Content-Type: application/json' "$API/api/v1/namespaces" \
    -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kueue-system"}}' >/dev/null || fail "create ns kueue-system"
  cat >"$D/kueue.yaml" <<KUEUECFG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: "127.0.0.1:$KH"
metrics:
  bindAddress: "127.0.0.1:$KM"
webhook:
  port: $KW
  host: 127.0.0.1
  certDir: $D/kueue-webhook
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
integrations:
  frameworks: ["batch/job"]
KUEUECFG
  T4=$(now)
  KUBECONFIG="$D/admin.kubeconfig" start kueue "$BIN/kueue" --config="$D/kueue.yaml" --feature-gates=VisibilityOnDemand=false
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$KH/readyz" || true)" = 200 ] && break
    kill -0 "${PIDS[3]}" 2>/dev/null || { tail -20 "$D/kueue.log"; fail "kueue exited"; }
    sleep 0.1
  done
  log "kueue /readyz 200 after $(since "$T4")s"
  KP() { K -f -X POST -H 'Content-Type: application/json' "$API/$1" -d "$2" >/dev/null || fail "POST $1"; }
  KP apis/kueue.x-k8s.io/v1beta2/clusterqueues '{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"gpu-cq"},"spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu","nvidia.com/gpu"],"flavors":[{"name":"h100","resources":[{"name":"cpu","nominalQuota":"64"},{"name":"nvidia.com/gpu","nominalQuota":"4"}]}]}]}}'
  KP apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues '{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"LocalQueue","metadata":{"name":"team-a"},"spec":{"clusterQueue":"gpu-cq"}}'
  wl() {
    KP apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":\"Workload\",\"metadata\":{\"name\":\"$1\"},\"spec\":{\"queueName\":\"team-a\",\"podSets\":[{\"name\":\"main\",\"count\":1,\"template\":{\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"example.invalid/cuda:1\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"nvidia.com/gpu\":\"$2\"},\"limits\":{\"nvidia.com/gpu\":\"$2\"}}}]}}}]}}"
  }
  wl wl-2gpu 2
  # A suspended Job with the queue label (no mutating webhook here, so suspend is set by hand).
  KP apis/batch/v1/namespaces/default/jobs '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"job-1gpu","labels":{"kueue.x-k8s.io/queue-name":"team-a"}},"spec":{"suspend":true,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"example.invalid/cuda:1","resources":{"requests":{"cpu":"1","nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"1"}}}]}}}}'
  adm=
  for _ in $(seq 1 300); do
    adm=$(K "$API/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/wl-2gpu" |
      jq -r '.status.conditions[]? | select(.type=="Admitted") | .status')
    [ "$adm" = True ] && break
    sleep 0.1
  done
  [ "$adm" = True ] || fail "Workload wl-2gpu not admitted"
  susp=
  for _ in $(seq 1 300); do
    susp=$(K "$API/apis/batch/v1/namespaces/default/jobs/job-1gpu" | jq -r '.spec.suspend')
    [ "$susp" = false ] && break
    sleep 0.1
  done
  [ "$susp" = false ] || fail "Job job-1gpu not unsuspended by Kueue"
  wl wl-4gpu 4 # only 1 of the 4 GPUs of the quota is left: stays pending
  KMSG=
  for _ in $(seq 1 300); do
    KMSG=$(K "$API/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/wl-4gpu" |
      jq -r '.status.conditions[]? | select(.type=="QuotaReserved" and .status=="False") | .message')
    [ -n "$KMSG" ] && break
    sleep 0.1
  done
  [ -n "$KMSG" ] || fail "Workload wl-4gpu got no pending condition"
  log "kueue: wl-2gpu Admitted, job-1gpu unsuspended, wl-4gpu pending: $KMSG"
  echo "RESULT kueue_pending=$KMSG"
fi

echo "RESULT etcd_ready_s=$T_ETCD apiserver_ready_s=$T_API"
echo "RESULT failed_scheduling=$MSG"
if [ "${KGPU_SMOKE_KEEP:-0}" = 1 ]; then
  echo "KEEP dir=$D token=$TOKEN api=$API  (export KUBECONFIG=$D/admin.kubeconfig; touch $D/stop to stop)" >&2
  while [ ! -e "$D/stop" ]; do sleep 1; done
fi
log "OK"
