#!/usr/bin/env bash
# Smoke test of the real JobSet controller (scripts/workload-controllers.sh) on the test control
# plane: run by ctest with the "controlplane" fixture, which sets CHAMBER_TEST_KUBECONFIG and
# CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from scripts/kube-tools.sh. Applies the JobSet CRD,
# starts jobset-controller in the background, and checks that a JobSet gets its Jobs (whose pods
# kube-controller-manager's Job controller creates; no kubelet runs them, so they stay Pending)
# and that suspending and resuming the JobSet suspends and resumes its Jobs.
#
# No webhook runs, so nothing defaults the JobSet: the test sets explicitly what upstream's
# mutating webhook would (see tools/workloadcontrollers/cmd/jobset-controller/main.go):
#   spec.successPolicy  {operator: All}
#   spec.startupPolicy  {startupPolicyOrder: AnyOrder}
#   spec.network        {enableDNSHostnames: true, publishNotReadyAddresses: true}
#                       (without it the reconciler dereferences a nil pointer)
#   replicatedJobs[].template.spec.completionMode                Indexed
#   replicatedJobs[].template.spec.template.spec.restartPolicy   OnFailure (the Job API also
#                       rejects a pod template without Never or OnFailure)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"

: "${CHAMBER_TEST_KUBECONFIG:?set by the controlplane fixture}"
: "${CHAMBER_TEST_CONTROLPLANE_DIR:?set by the controlplane fixture}"
tools="$("${root}/scripts/kube-tools.sh" path)" || {
  echo "kubectl is not installed; run scripts/kube-tools.sh" >&2
  exit 1
}
bin="$("${root}/scripts/workload-controllers.sh" bin-dir)"
crd="${bin}/crds/jobset.x-k8s.io_jobsets.yaml"
if [[ ! -x "${bin}/jobset-controller" || ! -f "${crd}" ]]; then
  echo "jobset-controller is not built in ${bin}; run scripts/workload-controllers.sh build" >&2
  exit 1
fi
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

# poll <seconds> <want> <command>...: runs the command until it prints <want>, time is up or
# jobset-controller (once started) has exited; prints what it printed last.
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

finish() {
  printf '%d passed, %d failed\n' $((checks - failures)) "${failures}"
  ((failures == 0))
  exit
}

ns="chamber-jobset-smoke-$$-${RANDOM}"
log="$(mktemp "${TMPDIR:-/tmp}/jobset-controller.XXXXXX.log")"
controller=""
cleanup() {
  local rc=$?
  if [[ -n "${controller}" ]] && kill -0 "${controller}" 2>/dev/null; then
    kill -TERM "${controller}" 2>/dev/null || true
    wait "${controller}" 2>/dev/null || true
  fi
  kubectl delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true
  if ((rc != 0 || failures != 0)); then
    echo "--- jobset-controller log (${log}), last 100 lines:"
    tail -n 100 "${log}" || true
  else
    rm -f "${log}"
  fi
}
trap cleanup EXIT

# The CRD of the release the controller was built from; server-side apply, so that reapplying
# it on a control plane shared with other tests changes nothing.
kubectl apply --server-side --force-conflicts --field-manager chamber-test -f "${crd}" >/dev/null
# (kubectl wait fails outright while the new CRD has no conditions yet, so poll instead.)
crd_established() {
  kubectl get crd jobsets.jobset.x-k8s.io \
    -o jsonpath='{.status.conditions[?(@.type=="Established")].status}'
}
expect "CRD established within 60s" "True" "$(poll 60 True crd_established)"

"${bin}/jobset-controller" --kubeconfig "${CHAMBER_TEST_KUBECONFIG}" </dev/null >"${log}" 2>&1 &
controller=$!

kubectl create namespace "${ns}" >/dev/null
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: smoke}
spec:
  successPolicy: {operator: All}
  startupPolicy: {startupPolicyOrder: AnyOrder}
  network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        completionMode: Indexed
        template:
          spec:
            restartPolicy: OnFailure
            nodeSelector: {nonexistent: "x"}
            containers: [{name: main, image: busybox, command: ["sleep", "3600"]}]
YAML

jobs() {
  kubectl -n "${ns}" get jobs -l jobset.sigs.k8s.io/jobset-name=smoke \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{end}'
}
suspended() {
  kubectl -n "${ns}" get jobs -l jobset.sigs.k8s.io/jobset-name=smoke \
    -o jsonpath='{range .items[*]}{.spec.suspend}{" "}{end}'
}
pod_count() {
  kubectl -n "${ns}" get pods -l jobset.sigs.k8s.io/jobset-name=smoke -o name | wc -l
}
jobset_condition() {
  kubectl -n "${ns}" get jobset smoke \
    -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}"
}

# The JobSet controller creates one Job per replica, owned by the JobSet.
# Later checks need the Jobs, and then their pods: without them the test stops early.
expect "jobs created within 30s" "smoke-workers-0 smoke-workers-1 " "$(poll 30 \
  "smoke-workers-0 smoke-workers-1 " jobs)"
((failures == 0)) || finish
for i in 0 1; do
  job="smoke-workers-${i}"
  expect "${job} owner" "JobSet/smoke/true" "$(kubectl -n "${ns}" get job "${job}" -o \
    jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}' \
    2>/dev/null)"
  expect "${job} labels replicatedjob-name/job-index" "workers/${i}" \
    "$(kubectl -n "${ns}" get job "${job}" -o \
      jsonpath='{.metadata.labels.jobset\.sigs\.k8s\.io/replicatedjob-name}/{.metadata.labels.jobset\.sigs\.k8s\.io/job-index}' \
      2>/dev/null)"
done
expect "jobs not suspended" "false false " "$(suspended)"
expect "headless service" "None" \
  "$(kubectl -n "${ns}" get service smoke -o jsonpath='{.spec.clusterIP}' 2>/dev/null)"

# kube-controller-manager's Job controller creates each Job's pod; no node matches the
# nodeSelector (there are no nodes), so they stay Pending.
expect "pods created within 30s" "2" "$(poll 30 2 pod_count)"
((failures == 0)) || finish
expect "pod owners" "Job/smoke-workers-0 Job/smoke-workers-1 " \
  "$(kubectl -n "${ns}" get pods -l jobset.sigs.k8s.io/jobset-name=smoke --sort-by \
    '{.metadata.labels.jobset\.sigs\.k8s\.io/job-index}' -o \
    jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{" "}{end}')"
expect "pod phases" "Pending Pending " "$(kubectl -n "${ns}" get pods \
  -l jobset.sigs.k8s.io/jobset-name=smoke -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}')"

# Suspending the JobSet suspends its Jobs; the Job controller then deletes their pods.
kubectl -n "${ns}" patch jobset smoke --type merge -p '{"spec":{"suspend":true}}' >/dev/null
expect "jobs suspended within 30s" "true true " "$(poll 30 "true true " suspended)"
expect "pods gone within 30s" "0" "$(poll 30 0 pod_count)"
expect "JobSet condition Suspended" "True" "$(poll 30 True jobset_condition Suspended)"

# Resuming it resumes the Jobs, and their pods come back.
kubectl -n "${ns}" patch jobset smoke --type merge -p '{"spec":{"suspend":false}}' >/dev/null
expect "jobs resumed within 30s" "false false " "$(poll 30 "false false " suspended)"
expect "pods back within 30s" "2" "$(poll 30 2 pod_count)"
expect "JobSet condition Suspended after resume" "False" \
  "$(poll 30 False jobset_condition Suspended)"

expect "jobset-controller still running" "yes" \
  "$(kill -0 "${controller}" 2>/dev/null && echo yes || echo no)"
finish
