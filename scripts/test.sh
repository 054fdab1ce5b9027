#!/usr/bin/env bash
# Installs what is missing, checks formatting, builds the test control plane
# (scripts/controlplane.sh) and the workload controllers (scripts/workload-controllers.sh), then
# builds and tests Chamber twice: every registered test on the release preset, and the unit tests
# on the asan preset (AddressSanitizer and UndefinedBehaviorSanitizer); then builds the libFuzzer
# harnesses and runs each briefly (scripts/fuzz.sh). Exits non-zero when any step fails.
#
# Environment:
#   CI=true                      plain output without colour
#   CMAKE_BUILD_PARALLEL_LEVEL   parallel compile jobs (default 2)
#   CTEST_PARALLEL_LEVEL         parallel test jobs (default 2)
#   CHAMBER_FUZZ_RUNS            inputs each fuzz harness tries (default 10000, at most 30 s)
#   CHAMBER_FUZZ_SEED            the fuzzers' seed (default 1: every run tries the same inputs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# ccache keys on compiler arguments, which hold absolute paths: relative to the checkout, a
# fresh clone in another folder (as CI makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
test_jobs="${CTEST_PARALLEL_LEVEL:-2}"

if [[ "${CI:-}" == "true" || ! -t 1 ]]; then
  bold="" red="" green="" reset=""
  export GTEST_COLOR=no NO_COLOR=1
else
  bold=$'\e[1m' red=$'\e[31m' green=$'\e[32m' reset=$'\e[0m'
fi

summary=()
ctest_logs=()
failed=0
started=${SECONDS}

# stage <name> <command>...: runs one step and records its outcome for the summary.
stage() {
  local name="$1" start=${SECONDS}
  shift
  printf '\n%s==> %s%s\n' "${bold}" "${name}" "${reset}"
  local outcome="${green}passed${reset}" rc=0
  "$@" || { outcome="${red}FAILED${reset}" rc=1 failed=1; }
  summary+=("$(printf '  %-18s %s %5ds' "${name}" "${outcome}" $((SECONDS - start)))")
  return "${rc}"
}

build() {
  cmake --preset "$1" && cmake --build --preset "$1"
}

# run_tests <preset> [ctest args...]: output is kept so the summary can repeat ctest's result.
run_tests() {
  local preset="$1" log="build/$1/ctest-output.log"
  shift
  ctest_logs+=("${log}")
  ctest --preset "${preset}" -j "${test_jobs}" --output-on-failure "$@" 2>&1 | tee "${log}"
}

finish() {
  local result="${green}PASSED${reset}" log
  [[ ${failed} -eq 0 ]] || result="${red}FAILED${reset}"
  printf '\n%s==> summary%s\n' "${bold}" "${reset}"
  printf '%s\n' "${summary[@]}"
  printf '  %s in %ds\n' "${result}" $((SECONDS - started))
  # ctest's own closing lines, for each test run, last.
  for log in "${ctest_logs[@]}"; do
    printf '\n%s:\n' "${log}"
    sed -n '/tests passed, .* tests failed out of/,$p' "${log}"
  done
  exit "${failed}"
}

stage "dependencies" scripts/install-deps.sh || finish
stage "format check" scripts/format.sh --check || finish
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler for the integration and e2e
# tests' control plane, and the kube-apiserver of Kubernetes 1.35 for the tests of its gang API
# (cached: a no-op unless tools/controlplane or tools/controlplane-1.35 changed).
stage "control plane" scripts/controlplane.sh build --all --k8s-1.35 || true
# The workload controllers (JobSet, Kubeflow training operator, KubeRay) and their CRDs for the
# integration tests (cached the same way: a no-op unless tools/workloadcontrollers changed).
stage "workload controllers" scripts/workload-controllers.sh build || true
if stage "release build" build release; then
  stage "release tests" run_tests release || true
fi
if stage "asan build" build asan; then
  stage "asan unit tests" run_tests asan -L unit || true
fi
# Each harness briefly over its seed corpus, the same inputs every time (a fixed seed and number
# of inputs), so that a red run is the change's doing; new findings come from the long runs
# (docs/reliability.md).
stage "fuzz" scripts/fuzz.sh --runs "${CHAMBER_FUZZ_RUNS:-10000}" --seconds 30 \
  --seed "${CHAMBER_FUZZ_SEED:-1}" || true
finish
