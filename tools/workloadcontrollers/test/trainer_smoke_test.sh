#!/usr/bin/env bash
# Smoke test of the real Kubeflow Trainer v2 controller (scripts/workload-controllers.sh) beside
# the real JobSet controller on the test control plane: run by ctest with the "controlplane"
# fixture, which sets CHAMBER_TEST_KUBECONFIG and CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from
# scripts/kube-tools.sh. Applies the JobSet CRD and the Trainer's (TrainJob, TrainingRuntime,
# ClusterTrainingRuntime), starts jobset-controller and trainer-controller in the background,
# and checks what Chamber relies on:
#   - a TrainJob created suspended against a ClusterTrainingRuntime gets its JobSet at once
#     (same name, controlled by the TrainJob, suspended, the trainer step's parallelism from
#     spec.trainer.numNodes, resources from spec.trainer.resourcesPerNode), and that JobSet its
#     Job, suspended, with no pods: the gang is known before any pod exists;
#   - resuming the TrainJob resumes the JobSet and its Job, whose pods (Pod -> Job -> JobSet ->
#     TrainJob) kube-controller-manager's Job controller creates (no kubelet: they stay Pending);
#   - suspending it again suspends the JobSet and the Job, and the pods go; the TrainJob says
#     Suspended; resuming brings them back;
#   - a JobSet suspended alone, under a running TrainJob, is resumed by the Trainer: the
#     TrainJob's spec.suspend is the one that holds.
#
# No webhook runs, so the runtime's JobSet template spells out what the JobSet webhook would
# default (see tools/workloadcontrollers/cmd/jobset-controller/main.go).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

smoke_setup trainer-controller trainer jobset.x-k8s.io_jobsets.yaml \
  trainer.kubeflow.org_trainjobs.yaml trainer.kubeflow.org_trainingruntimes.yaml \
  trainer.kubeflow.org_clustertrainingruntimes.yaml
[[ -x "${bin}/jobset-controller" ]] || {
  echo "jobset-controller is not built in ${bin}; run scripts/workload-controllers.sh build" >&2
  exit 1
}
runtime="${ns}"  # cluster-scoped: one per run
jobset_log="$(mktemp "${TMPDIR:-/tmp}/jobset-controller.XXXXXX.log")"
jobset_controller=""
before_controller_stop() {
  kubectl delete clustertrainingruntime "${runtime}" --wait=false >/dev/null 2>&1 || true
  if [[ -n "${jobset_controller}" ]]; then
    kill -TERM "${jobset_controller}" 2>/dev/null || true
    wait "${jobset_controller}" 2>/dev/null || true
  fi
  if ((failures != 0)); then
    echo "--- jobset-controller log (${jobset_log}), last 50 lines:"
    tail -n 50 "${jobset_log}" || true
  else
    rm -f "${jobset_log}"
  fi
}

apply_crds
"${bin}/jobset-controller" --kubeconfig "${CHAMBER_TEST_KUBECONFIG}" </dev/null \
  >"${jobset_log}" 2>&1 &
jobset_controller=$!
start_controller

kubectl create namespace "${ns}" >/dev/null
kubectl create -f - >/dev/null <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: ${runtime}}
spec:
  mlPolicy: {numNodes: 1}
  template:
    spec:
      successPolicy: {operator: All}
      startupPolicy: {startupPolicyOrder: AnyOrder}
      network: {enableDNSHostnames: true, publishNotReadyAddresses: true}
      replicatedJobs:
      - name: node
        replicas: 1
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            backoffLimit: 0
            completionMode: Indexed
            template:
              spec:
                restartPolicy: OnFailure
                nodeSelector: {nonexistent: "x"}
                containers: [{name: node, image: busybox, command: ["sleep", "3600"]}]
YAML
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: smoke}
spec:
  suspend: true
  runtimeRef: {name: ${runtime}}
  trainer:
    numNodes: 2
    resourcesPerNode: {limits: {nvidia.com/gpu: "4"}}
YAML

field() {  # field <kind/name> <jsonpath>
  kubectl -n "${ns}" get "$1" -o jsonpath="$2" 2>/dev/null
}
job_field() {
  kubectl -n "${ns}" get jobs -l jobset.sigs.k8s.io/jobset-name=smoke \
    -o jsonpath="{range .items[*]}$1{\" \"}{end}"
}
pod_count() {
  kubectl -n "${ns}" get pods -l jobset.sigs.k8s.io/jobset-name=smoke -o name | wc -l
}
condition() {  # condition <kind/name> <type>
  field "$1" "{.status.conditions[?(@.type==\"$2\")].status}"
}

# Created suspended, it gets its JobSet, and the JobSet its Job, both suspended, no pods.
expect "JobSet created within 30s" "smoke" "$(poll 30 smoke field jobset/smoke '{.metadata.name}')"
((failures == 0)) || finish
expect "JobSet owner" "TrainJob/smoke/true" "$(field jobset/smoke \
  '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')"
expect "JobSet suspended" "true" "$(field jobset/smoke '{.spec.suspend}')"
expect "trainer step from numNodes and resourcesPerNode" "1/2/2/4" "$(field jobset/smoke \
  '{.spec.replicatedJobs[0].replicas}/{.spec.replicatedJobs[0].template.spec.parallelism}/{.spec.replicatedJobs[0].template.spec.completions}/{.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits.nvidia\.com/gpu}')"
expect "Job created, suspended, within 30s" "true " "$(poll 30 "true " job_field '{.spec.suspend}')"
expect "Job owner" "JobSet/smoke " "$(job_field \
  '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')"
expect "TrainJob condition Suspended" "True" "$(poll 30 True condition trainjob/smoke Suspended)"
sleep 2
expect "no pods while suspended" "0" "$(pod_count)"

# Resumed, its JobSet and Job resume, and the Job controller makes the pods.
kubectl -n "${ns}" patch trainjob smoke --type merge -p '{"spec":{"suspend":false}}' >/dev/null
expect "JobSet resumed within 30s" "false" "$(poll 30 false field jobset/smoke '{.spec.suspend}')"
expect "Job resumed within 30s" "false " "$(poll 30 "false " job_field '{.spec.suspend}')"
expect "pods created within 30s" "2" "$(poll 30 2 pod_count)"
((failures == 0)) || finish
expect "pod owners" "Job/smoke-node-0 Job/smoke-node-0 " "$(kubectl -n "${ns}" get pods \
  -l jobset.sigs.k8s.io/jobset-name=smoke -o \
  jsonpath='{range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{" "}{end}')"
expect "TrainJob condition Suspended after resume" "False" \
  "$(poll 30 False condition trainjob/smoke Suspended)"

# Suspended again: the JobSet, then the Job; the pods go.
kubectl -n "${ns}" patch trainjob smoke --type merge -p '{"spec":{"suspend":true}}' >/dev/null
expect "JobSet suspended within 30s" "true" "$(poll 30 true field jobset/smoke '{.spec.suspend}')"
expect "Job suspended within 30s" "true " "$(poll 30 "true " job_field '{.spec.suspend}')"
expect "pods gone within 30s" "0" "$(poll 30 0 pod_count)"
expect "TrainJob condition Suspended again" "True" \
  "$(poll 30 True condition trainjob/smoke Suspended)"

kubectl -n "${ns}" patch trainjob smoke --type merge -p '{"spec":{"suspend":false}}' >/dev/null
expect "pods back within 30s" "2" "$(poll 30 2 pod_count)"

# The JobSet suspended alone, under the running TrainJob: the Trainer resumes it.
expect "JobSet suspended alone (the patch's answer)" "true" "$(kubectl -n "${ns}" patch jobset \
  smoke --type merge -p '{"spec":{"suspend":true}}' -o jsonpath='{.spec.suspend}')"
expect "JobSet suspended alone is resumed by the Trainer within 30s" "false" \
  "$(poll 30 false field jobset/smoke '{.spec.suspend}')"

expect_controller_running
expect "jobset-controller still running" "yes" \
  "$(kill -0 "${jobset_controller}" 2>/dev/null && echo yes || echo no)"
finish
