#!/usr/bin/env bash
# The fault-injection harness outside ctest, on a private control plane of its own: the long run
# (docs/reliability.md, "Faults on the real control plane").
#
# Usage:
#   scripts/fault-run.sh [--build-dir DIR] [--faults N] [--seed S] [--kinds K1,K2] [--keep]
#       Starts etcd, kube-apiserver and kube-controller-manager in a fresh directory
#       (scripts/controlplane.sh start), runs fault_e2e_test from DIR (default build/release)
#       with N faults (default 1000) and seed S (default: a random one, printed), and stops the
#       control plane. As the control plane is its own, the faults include restarts of the
#       kube-apiserver and of etcd. --kinds injects only those (apiserver-restart, etcd-restart,
#       kill-leader, stop-leader, latency, errors, watch-cut, 410-gone, outage, report-loss,
#       report-repeat; default: all).
#       --keep leaves the control plane's directory behind, with the logs of the control plane
#       and of the chamberd replicas in its logs/.
#
# Build first: cmake --build build/release --target chamberd faultproxy fault_e2e_test
# and the control plane: scripts/controlplane.sh build --all
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${root}/build/release" faults=1000 seed="" kinds="" keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$(cd "$2" && pwd)" && shift 2 ;;
    --faults) faults="$2" && shift 2 ;;
    --seed) seed="$2" && shift 2 ;;
    --kinds) kinds="$2" && shift 2 ;;
    --keep) keep=1 && shift ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
      exit 0
      ;;
    *)
      echo "fault-run.sh: unknown argument '$1' (see --help)" >&2
      exit 2
      ;;
  esac
done

test_bin="${build}/src/chamberd/fault_e2e_test"
[[ -x "${test_bin}" ]] || {
  echo "fault-run.sh: ${test_bin} is not built; run:" \
    "cmake --build ${build} --target chamberd faultproxy fault_e2e_test" >&2
  exit 1
}

dir="$(mktemp -d "${TMPDIR:-/tmp}/chamber-faults.XXXXXX")"
cleanup() {
  "${root}/scripts/controlplane.sh" stop "${dir}" || true
  if ((keep)); then
    echo "fault-run.sh: control plane logs in ${dir}/logs" >&2
  else
    rm -rf "${dir}"
  fi
}
trap cleanup EXIT
"${root}/scripts/controlplane.sh" start "${dir}" --controller-manager

export CHAMBER_TEST_KUBECONFIG="${dir}/kubeconfig"
export CHAMBER_TEST_CONTROLPLANE_DIR="${dir}"
export CHAMBER_FAULTS="${faults}"
# The control plane is the run's own: the harness may restart its apiserver and etcd.
export CHAMBER_FAULT_OWN_CONTROLPLANE=1
[[ -n "${seed}" ]] && export CHAMBER_FAULT_SEED="${seed}"
[[ -n "${kinds}" ]] && export CHAMBER_FAULT_KINDS="${kinds}"
((keep)) && export CHAMBER_FAULT_LOG_DIR="${dir}/logs"
start=${SECONDS}
rc=0
"${test_bin}" --gtest_filter='FaultE2E.FaultsOnTheControlPlaneBreakNoPromise' || rc=$?
echo "fault-run.sh: ${faults} faults, exit ${rc}, $((SECONDS - start)) s"
exit "${rc}"
