#!/usr/bin/env bash
# Start the test control plane by hand, for exploration and demos:
#
#   tests/cluster/run.sh            # builds if needed; first line: export KUBECONFIG=...
#   tests/cluster/run.sh --crds     # also installs the Kueue and Volcano CRDs
#
# In another shell: eval "$(head -1 <that output>)" or copy the export line, then
#   kgpu scenario apply fragmented && kgpu
# Runs until interrupted (ctrl-c); etcd, kube-apiserver and kube-scheduler stop with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --quiet --example controlplane >&2
exec target/debug/examples/controlplane "$@"
