#!/usr/bin/env bash
# Build a real etcd + kube-apiserver + kube-scheduler + kube-controller-manager + kubectl, KWOK and
# the Kueue manager (and collect the Kueue, Volcano and KWOK Stage CRDs) from the Go module proxy,
# for kgpu's live tests and `kgpu lab`. See README.md beside this file.
#
#   tests/cluster/build.sh            # prints the cp-<key> directory as its LAST stdout line
#
# Environment:
#   KGPU_CP_CACHE       cache root (default $HOME/.cache/kgpu); output goes to $KGPU_CP_CACHE/cp-<key>/
#
# Layout of cp-<key>/:
#   bin/{etcd,kube-apiserver,kube-scheduler,kube-controller-manager,kubectl,kwok,kueue}
#   crds/kueue/kueue.x-k8s.io_*.yaml          (11 files, v1beta1 served + v1beta2 storage)
#   crds/volcano/scheduling.volcano.sh_{podgroups,queues}.yaml
#   crds/kwok/kwok.x-k8s.io_stages.yaml       (the lab's KWOK reads its stages from Stage objects)
#   versions.txt
#
# <key> = first 16 hex of sha256 over this script and the wrapper go.mod/go.sum files, so any
# pin change builds into a fresh directory, and an existing complete directory is reused without
# running go at all. Progress goes to stderr; stdout carries only the directory path.
set -euo pipefail

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${KGPU_CP_CACHE:-${HOME:?HOME is not set}/.cache/kgpu}

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: ERROR: $*" >&2; exit 1; }

KEY_INPUTS=("$HERE/build.sh"
  "$HERE/k8s/go.mod" "$HERE/k8s/go.sum"
  "$HERE/etcd/go.mod" "$HERE/etcd/go.sum"
  "$HERE/extras/go.mod" "$HERE/extras/go.sum"
  "$HERE/kwok/go.mod" "$HERE/kwok/go.sum")
for f in "${KEY_INPUTS[@]}"; do [ -f "$f" ] || die "missing $f (wrapper modules are part of the repo)"; done
command -v sha256sum >/dev/null || die "sha256sum not found (coreutils)"
KEY=$(cd "$HERE" && sha256sum build.sh k8s/go.mod k8s/go.sum etcd/go.mod etcd/go.sum extras/go.mod extras/go.sum \
  kwok/go.mod kwok/go.sum |
  sha256sum | cut -c1-16)
OUT="$CACHE_ROOT/cp-$KEY"
BIN="$OUT/bin"
CRDS="$OUT/crds"

BINS=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok kueue)

is_complete() {
  local b
  for b in "${BINS[@]}"; do [ -x "$BIN/$b" ] || return 1; done
  [ -f "$OUT/.crds-done" ]
}

# Fast path: nothing to do (no go, no network needed).
if is_complete; then
  log "up to date: $OUT"
  echo "$OUT"
  exit 0
fi

# ---- prerequisites -----------------------------------------------------------------------
command -v go >/dev/null ||
  die "'go' is not in PATH. Needed: Go >= 1.26.0 (the k8s v1.36 wrapper says 'go 1.26.0'; GOTOOLCHAIN=local, so no toolchain is downloaded)."
GOV=$(go env GOVERSION) # e.g. go1.26.8
GOMINOR=$(echo "$GOV" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
[ -n "$GOMINOR" ] && [ "$GOMINOR" -ge 26 ] ||
  die "Go >= 1.26.0 is needed, found $GOV ($(command -v go))."

mkdir -p "$CACHE_ROOT"
# Serialise concurrent callers (e.g. several test binaries starting at once).
if command -v flock >/dev/null; then
  exec 9>"$CACHE_ROOT/.build.lock"
  flock 9
  if is_complete; then log "built meanwhile by another process: $OUT"; echo "$OUT"; exit 0; fi
fi
mkdir -p "$BIN" "$CRDS/kueue" "$CRDS/volcano" "$CRDS/kwok"
# A build cache of its own, removed once every binary is built: Kubernetes leaves gigabytes of
# objects in Go's cache that nothing reuses, and CI machines can be short of disk.
export GOCACHE="$CACHE_ROOT/.go-build"

# Make sure every module is in the module cache; say clearly when the proxy is the problem.
download() { # dir
  local dir=$1 err
  if ! err=$(cd "$HERE/$dir" && go mod download 2>&1); then
    echo "$err" | tail -n 5 >&2
    if echo "$err" | grep -qiE 'dial tcp|no such host|i/o timeout|connection refused|TLS handshake|proxyconnect|network is unreachable|Forbidden|Not Found|410 Gone|unknown revision|module lookup disabled|verifying module'; then
      die "cannot fetch the modules of tests/cluster/$dir from the Go module proxy (GOPROXY=$(go env GOPROXY)); the proxy is unreachable or refuses a pinned version. Network access to the Go module proxy is needed once; afterwards the module cache ($(go env GOMODCACHE)) suffices."
    fi
    die "'go mod download' failed in tests/cluster/$dir (see above)."
  fi
}

build() { # name dir pkg ldflags
  local name=$1 dir=$2 pkg=$3 ldflags=$4 t0
  if [ -x "$BIN/$name" ]; then log "$name: present"; return; fi
  log "$name: building $pkg (nice -n 10, -p 2) ..."
  t0=$(date +%s)
  (cd "$HERE/$dir" && nice -n 10 go build -p 2 -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg") ||
    die "go build of $pkg failed"
  mv -f "$BIN/.$name.tmp" "$BIN/$name"
  log "$name: built in $(($(date +%s) - t0))s"
}

modver() { (cd "$HERE/$1" && go list -m -f '{{.Version}}' "$2"); }
moddir() { (cd "$HERE/$1" && go list -m -f '{{.Dir}}' "$2"); }

# ---- etcd ------------------------------------------------------------------------------
download etcd
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"

# ---- kube-apiserver, kube-scheduler ----------------------------------------------------
download k8s
KV=$(modver k8s k8s.io/kubernetes) # v1.36.3
KMAJ=$(echo "$KV" | sed -E 's/^v([0-9]+)\..*/\1/')
KMIN=$(echo "$KV" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')
KDATE=$(cd "$HERE/k8s" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)
KDATE=${KDATE:-1970-01-01T00:00:00Z}
# Without these, /version says v0.0.0-master+$Format:%H$ (Kueue refuses to start, clients misparse).
LDF="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDF="$LDF -X $p.gitVersion=$KV -X $p.gitMajor=$KMAJ -X $p.gitMinor=$KMIN"
  LDF="$LDF -X $p.gitTreeState=clean -X $p.buildDate=$KDATE -X $p.gitCommit="
done
build kube-apiserver k8s k8s.io/kubernetes/cmd/kube-apiserver "$LDF"
build kube-scheduler k8s k8s.io/kubernetes/cmd/kube-scheduler "$LDF"
# The lab's controllers: Jobs, ReplicaSets, eviction, garbage collection, node lifecycle.
build kube-controller-manager k8s k8s.io/kubernetes/cmd/kube-controller-manager "$LDF"
# kubectl: the benchmark times `kubectl get pods -A -o json --chunk-size=500` next to kgpu.
build kubectl k8s k8s.io/kubernetes/cmd/kubectl "$LDF"
got=$("$BIN/kube-apiserver" --version 2>&1 || true)
[ "$got" = "Kubernetes $KV" ] || die "kube-apiserver --version says '$got', expected 'Kubernetes $KV'"

# ---- CRDs and Kueue ----------------------------------------------------------------------
download extras
QV=$(modver extras sigs.k8s.io/kueue)
QDIR=$(moddir extras sigs.k8s.io/kueue)
VAV=$(modver extras volcano.sh/apis)
QLDF="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$QV -X sigs.k8s.io/kueue/pkg/version.GitCommit="
build kueue extras sigs.k8s.io/kueue/cmd/kueue "$QLDF"

# ---- KWOK: fake kubelets (node heartbeats, pods that run and finish) ----------------------
download kwok
WV=$(modver kwok sigs.k8s.io/kwok)
WDIR=$(moddir kwok sigs.k8s.io/kwok)
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w"

if [ ! -f "$OUT/.crds-done" ]; then
  # Kueue: shipped in the module zip.
  rm -f "$CRDS/kueue/"*.yaml
  cp "$QDIR"/config/components/crd/bases/kueue.x-k8s.io_*.yaml "$CRDS/kueue/"
  chmod 644 "$CRDS/kueue/"*.yaml
  [ "$(ls "$CRDS/kueue" | wc -l)" -ge 10 ] || die "expected Kueue CRDs under $QDIR/config/components/crd/bases"

  # Volcano: volcano.sh/volcano (which carries config/crd/volcano/bases) is not served by the
  # proxy, so regenerate them from volcano.sh/apis the way volcano's `make manifests` does.
  log "volcano CRDs: generating from volcano.sh/apis@$VAV with controller-gen ..."
  build .controller-gen extras sigs.k8s.io/controller-tools/cmd/controller-gen "-s -w"
  rm -f "$CRDS/volcano/"*.yaml
  (cd "$HERE/extras" && "$BIN/.controller-gen" crd:crdVersions=v1,generateEmbeddedObjectMeta=true \
    paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 output:crd:artifacts:config="$CRDS/volcano") ||
    die "controller-gen failed for volcano.sh/apis"
  rm -f "$BIN/.controller-gen"

  # KWOK's Stage CRD ships in its module zip.
  cp "$WDIR/kustomize/crd/bases/kwok.x-k8s.io_stages.yaml" "$CRDS/kwok/"
  chmod 644 "$CRDS/kwok/"*.yaml
  for f in podgroups queues; do
    [ -s "$CRDS/volcano/scheduling.volcano.sh_$f.yaml" ] || die "volcano CRD $f was not generated"
  done

  {
    echo "kubernetes $KV (go $GOV)"
    echo "etcd $(modver etcd go.etcd.io/etcd/server/v3)"
    echo "kueue $QV (CRDs from $QDIR/config/components/crd/bases)"
    echo "kwok $WV (Stage CRD from $WDIR/kustomize/crd/bases)"
    echo "volcano.sh/apis $VAV (CRDs generated by controller-gen $(modver extras sigs.k8s.io/controller-tools))"
  } >"$OUT/versions.txt"
  touch "$OUT/.crds-done"
fi

is_complete || die "internal: $OUT is incomplete after building"
log "go build cache: $(du -sh "$GOCACHE" 2>/dev/null | cut -f1), removed"
rm -rf "$GOCACHE"
log "done: $OUT ($(du -sh "$OUT" | cut -f1))"
echo "$OUT"
