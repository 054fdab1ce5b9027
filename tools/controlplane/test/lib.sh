# Sourced (not run) by the smoke tests that run on the test control plane: smoke_test.sh here
# and, through tools/workloadcontrollers/test/lib.sh, the workload controllers'. Checks that
# CHAMBER_TEST_KUBECONFIG and CHAMBER_TEST_CONTROLPLANE_DIR are set (by ctest's "controlplane"
# fixture) and that scripts/kube-tools.sh installed kubectl, exiting 1 otherwise; exports
# KUBECONFIG=$CHAMBER_TEST_KUBECONFIG, and defines
#   root                         the repository root
#   tools                        kubectl's directory
#   kubectl <arg>...             that kubectl
#   expect <what> <want> <got>   one check: prints ok or FAIL and counts it (checks, failures)
#   finish                       prints the totals and exits, 1 if a check failed, else 0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"

: "${CHAMBER_TEST_KUBECONFIG:?set by the controlplane fixture}"
: "${CHAMBER_TEST_CONTROLPLANE_DIR:?set by the controlplane fixture}"
tools="$("${root}/scripts/kube-tools.sh" path)" || {
  echo "kubectl is not installed; run scripts/kube-tools.sh" >&2
  exit 1
}
export KUBECONFIG="${CHAMBER_TEST_KUBECONFIG}"
kubectl() { "${tools}/kubectl" "$@"; }

failures=0 checks=0
# expect <what> <want> <got>
expect() {
  checks=$((checks + 1))
  if [[ "$2" == "$3" ]]; then
    printf 'ok    %s: %s\n' "$1" "$3"
  else
    printf 'FAIL  %s: want %q, got %q\n' "$1" "$2" "$3"
    failures=$((failures + 1))
  fi
}

finish() {
  printf '%d passed, %d failed\n' $((checks - failures)) "${failures}"
  ((failures == 0))
  exit
}
