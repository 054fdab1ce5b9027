#!/usr/bin/env bash
# chamberd against kube-scheduler on one test control plane: N fake GPU nodes, M pending
# single-GPU pods per scheduler, time until all are bound and each scheduler's peak memory.
#
#   scripts/bench-schedulers.sh [--nodes 5000] [--pods 10000] [scheduler_bench flags...]
#
# Builds what it needs (release preset), starts etcd, kube-apiserver and kube-controller-manager
# in a temporary directory, runs build/release/src/chamberd/scheduler_bench and stops them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

cmake --preset release >/dev/null
cmake --build --preset release --target chamberd scheduler_bench
scripts/controlplane.sh build --all
dir="$(mktemp -d /tmp/chamber-bench-schedulers.XXXXXX)"
cleanup() { scripts/controlplane.sh stop "${dir}" || true; rm -rf "${dir}"; }
trap cleanup EXIT
scripts/controlplane.sh start "${dir}" --controller-manager
bin="$(scripts/controlplane.sh bin-dir)"
build/release/src/chamberd/scheduler_bench \
  --kubeconfig "${dir}/kubeconfig" \
  --chamberd build/release/src/chamberd/chamberd \
  --kube-scheduler "${bin}/kube-scheduler" \
  --work-dir "${dir}/work" "$@"
