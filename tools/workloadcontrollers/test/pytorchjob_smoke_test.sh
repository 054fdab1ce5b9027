#!/usr/bin/env bash
# Smoke test of the real Kubeflow training operator (scripts/workload-controllers.sh) on the test
# control plane: run by ctest with the "controlplane" fixture, which sets CHAMBER_TEST_KUBECONFIG
# and CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from scripts/kube-tools.sh. Applies the
# PyTorchJob CRD, starts training-operator (PyTorchJobs only) in the background, and checks that
# a PyTorchJob gets its pods (no kubelet runs them, so they stay Pending), owned by it, and that
# suspending it (spec.runPolicy.suspend) deletes them and resuming it recreates them.
#
# No webhook runs; upstream's are validation only, and the reconciler applies the scheme's
# defaults (runPolicy, restartPolicy OnFailure, the master port 23456) to what it reads itself,
# so the PyTorchJob sets nothing for want of defaulting. What it must set anyway: the container
# that the operator configures (MASTER_ADDR, WORLD_SIZE, ..., the port) is the one named
# "pytorch"; upstream's webhook rejects a job without one, here it would go unconfigured.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

smoke_setup training-operator pytorchjob kubeflow.org_pytorchjobs.yaml
apply_crds
# Only the PyTorchJob reconciler: the other kinds' CRDs are not applied.
start_controller --enable-scheme=pytorchjob

kubectl create namespace "${ns}" >/dev/null
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: smoke}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          nodeSelector: {nonexistent: "x"}
          containers: [{name: pytorch, image: busybox, command: ["sleep", "3600"]}]
    Worker:
      replicas: 2
      template:
        spec:
          nodeSelector: {nonexistent: "x"}
          containers: [{name: pytorch, image: busybox, command: ["sleep", "3600"]}]
YAML

selector=training.kubeflow.org/job-name=smoke
pods() {
  kubectl -n "${ns}" get pods -l "${selector}" --sort-by '{.metadata.name}' \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{end}'
}
pod_count() {
  kubectl -n "${ns}" get pods -l "${selector}" -o name | wc -l
}
pod_uids() {
  kubectl -n "${ns}" get pods -l "${selector}" --sort-by '{.metadata.name}' \
    -o jsonpath='{range .items[*]}{.metadata.uid}{" "}{end}'
}
job_condition() {
  kubectl -n "${ns}" get pytorchjob smoke \
    -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}"
}

# The operator creates one pod (and one headless service) per replica, named
# <job>-<replica type>-<index>, owned by the PyTorchJob. Later checks need them.
want_pods="smoke-master-0 smoke-worker-0 smoke-worker-1 "
expect "pods created within 30s" "${want_pods}" "$(poll 30 "${want_pods}" pods)"
((failures == 0)) || finish
job_uid="$(kubectl -n "${ns}" get pytorchjob smoke -o jsonpath='{.metadata.uid}')"
for pod in ${want_pods}; do
  expect "${pod} controller owner" "PyTorchJob/smoke/${job_uid}" \
    "$(kubectl -n "${ns}" get pod "${pod}" -o \
      jsonpath='{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}/{.metadata.ownerReferences[?(@.controller==true)].uid}' \
      2>/dev/null)"
done
expect "pod labels replica-type/replica-index" "master/0 worker/0 worker/1 " \
  "$(kubectl -n "${ns}" get pods -l "${selector}" --sort-by '{.metadata.name}' -o \
    jsonpath='{range .items[*]}{.metadata.labels.training\.kubeflow\.org/replica-type}/{.metadata.labels.training\.kubeflow\.org/replica-index}{" "}{end}')"
expect "pod phases" "Pending Pending Pending " "$(kubectl -n "${ns}" get pods -l "${selector}" \
  -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}')"
expect "JobCondition Created" "True" "$(poll 30 True job_condition Created)"
uids_before="$(pod_uids)"

# Suspending it deletes the pods (and services) and sets the condition Suspended.
kubectl -n "${ns}" patch pytorchjob smoke --type merge \
  -p '{"spec":{"runPolicy":{"suspend":true}}}' >/dev/null
expect "pods gone within 30s" "0" "$(poll 30 0 pod_count)"
expect "condition Suspended" "True" "$(poll 30 True job_condition Suspended)"

# Resuming it recreates them, under the same names (new pods), and Suspended turns False.
kubectl -n "${ns}" patch pytorchjob smoke --type merge \
  -p '{"spec":{"runPolicy":{"suspend":false}}}' >/dev/null
expect "pods back within 30s" "${want_pods}" "$(poll 30 "${want_pods}" pods)"
expect "condition Suspended after resume" "False" "$(poll 30 False job_condition Suspended)"
uids_after="$(pod_uids)"
expect "pods are new ones" "yes" "$([[ -n "${uids_after}" && "${uids_after}" != "${uids_before}" ]] &&
  echo yes || echo no)"

expect_controller_running
finish
