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
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

smoke_setup jobset-controller jobset jobset.x-k8s.io_jobsets.yaml
apply_crds
start_controller

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

expect_controller_running
finish
