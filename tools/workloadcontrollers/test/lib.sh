# Sourced (not run) by the smoke tests here, each of one controller that
# scripts/workload-controllers.sh builds, on the test control plane. Sources
# tools/controlplane/test/lib.sh first (its environment checks, root, tools, kubectl, expect,
# finish), then defines
#   smoke_setup <controller> <test> <CRD file>...
#       checks that <controller> and the CRD files (in the bin dir's crds/) are built, exiting 1
#       otherwise, and sets
#         bin          the bin dir (scripts/workload-controllers.sh bin-dir)
#         crds         the CRD files' paths
#         ns           the test's namespace, chamber-<test>-smoke-<pid>-<random> (not created)
#         log          the controller's log, a temporary file
#         controller   its pid once start_controller has started it; empty until then
#       On exit: if the controller still runs, runs the test's before_controller_stop (if it
#       defines one) and stops it; deletes the namespace; and if a check failed or the exit
#       status is not 0, prints the last 100 lines of the log, else removes it.
#   apply_crds                   applies the CRDs; checks that they are established within 60s
#   start_controller [<arg>...]  starts the controller in the background, logging to ${log}
#   poll <seconds> <want> <command>...
#   expect_controller_running    checks that the controller has not exited
# shellcheck source=../../controlplane/test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../controlplane/test/lib.sh"

smoke_setup() {
  controller_name="$1"
  local test="$2" file
  shift 2
  bin="$("${root}/scripts/workload-controllers.sh" bin-dir)"
  crds=()
  for file in "$@"; do crds+=("${bin}/crds/${file}"); done
  local built=true
  [[ -x "${bin}/${controller_name}" ]] || built=false
  for file in "${crds[@]}"; do [[ -f "${file}" ]] || built=false; done
  if ! "${built}"; then
    echo "${controller_name} is not built in ${bin}; run scripts/workload-controllers.sh build" >&2
    exit 1
  fi

  ns="chamber-${test}-smoke-$$-${RANDOM}"
  log="$(mktemp "${TMPDIR:-/tmp}/${controller_name}.XXXXXX.log")"
  controller=""
  trap smoke_cleanup EXIT
}

smoke_cleanup() {
  local rc=$?
  if [[ -n "${controller}" ]] && kill -0 "${controller}" 2>/dev/null; then
    if declare -F before_controller_stop >/dev/null; then before_controller_stop; fi
    kill -TERM "${controller}" 2>/dev/null || true
    wait "${controller}" 2>/dev/null || true
  fi
  kubectl delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true
  if ((rc != 0 || failures != 0)); then
    echo "--- ${controller_name} log (${log}), last 100 lines:"
    tail -n 100 "${log}" || true
  else
    rm -f "${log}"
  fi
}

# The CRDs of the release the controller was built from; server-side apply, so that reapplying
# them on a control plane shared with other tests changes nothing.
apply_crds() {
  local args=() file names
  for file in "${crds[@]}"; do args+=(-f "${file}"); done
  names="$(kubectl apply --server-side --force-conflicts --field-manager chamber-test \
    "${args[@]}" -o name)"
  # (kubectl wait fails outright while a new CRD has no conditions yet, so poll instead.)
  # kubectl gets one object for one name, a list for several.
  # shellcheck disable=SC2086 # the names, one a line
  if ((${#crds[@]} == 1)); then
    expect "CRD established within 60s" "True" "$(poll 60 True kubectl get ${names} \
      -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')"
  else
    local want
    want="$(printf 'True %.0s' "${crds[@]}")"
    expect "CRDs established within 60s" "${want}" "$(poll 60 "${want}" kubectl get ${names} \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{" "}{end}')"
  fi
}

start_controller() {
  "${bin}/${controller_name}" --kubeconfig "${CHAMBER_TEST_KUBECONFIG}" "$@" \
    </dev/null >"${log}" 2>&1 &
  controller=$!
}

# poll <seconds> <want> <command>...: runs the command until it prints <want>, time is up or
# the controller (once started) has exited; prints what it printed last.
poll() {
  local deadline=$((SECONDS + $1)) want="$2" got=""
  shift 2
  while true; do
    got="$("$@" 2>/dev/null || true)"
    [[ "${got}" == "${want}" ]] || ((SECONDS >= deadline)) && break
    [[ -z "${controller}" ]] || kill -0 "${controller}" 2>/dev/null || break
    sleep 0.2
  done
  printf '%s\n' "${got}"
}

expect_controller_running() {
  expect "${controller_name} still running" "yes" \
    "$(kill -0 "${controller}" 2>/dev/null && echo yes || echo no)"
}
