#!/usr/bin/env bash
# Time to first dashboard (docs/install.md): starts the test control plane in a temporary
# directory, runs `deploy/helm/test/chart_test.sh timing RUNS` (helm install, then chamberd with
# the chart's service account until /api/v1/fleet lists the fake GPU nodes' GPUs) and stops it.
#
#   scripts/time-to-dashboard.sh [BUILD_DIR] [RUNS]     defaults: build/release, 3
#
# Needs chamberd and chamber-kubesim built in BUILD_DIR, and the control plane binaries
# (scripts/controlplane.sh build --all).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-${root}/build/release}" && pwd)"
runs="${2:-3}"
export CHAMBER_CHAMBERD="${build}/src/chamberd/chamberd"
export CHAMBER_KUBESIM="${build}/src/kubesim/chamber-kubesim"
for b in "${CHAMBER_CHAMBERD}" "${CHAMBER_KUBESIM}"; do
  [[ -x "${b}" ]] || {
    printf 'time-to-dashboard: %s is not built: cmake --build %s --target chamberd chamber-kubesim\n' \
      "${b}" "${build}" >&2
    exit 2
  }
done
dir="$(mktemp -d)"
trap '"${root}/scripts/controlplane.sh" stop "${dir}" >/dev/null 2>&1 || true; rm -rf "${dir}"' EXIT
"${root}/scripts/controlplane.sh" start "${dir}" --controller-manager >/dev/null
CHAMBER_TEST_CONTROLPLANE_DIR="${dir}" "${root}/deploy/helm/test/chart_test.sh" timing "${runs}"
