#!/usr/bin/env bash
# Smoke test of the real KubeRay operator (scripts/workload-controllers.sh) on the test control
# plane: run by ctest with the "controlplane" fixture, which sets CHAMBER_TEST_KUBECONFIG and
# CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from scripts/kube-tools.sh. Applies the RayCluster
# and RayJob CRDs, starts kuberay-operator in the background, and checks
#   - that a RayCluster gets its head and worker pods (no kubelet runs them, so they stay
#     Pending), owned by it, and that suspending it (spec.suspend) deletes them and resuming it
#     recreates them;
#   - that a RayJob created suspended gets no RayCluster, and once resumed gets one, owned by
#     it, whose pods the RayCluster owns; suspending it again deletes that RayCluster.
#
# No webhook runs; KubeRay has no defaulting webhook, and neither object sets anything here for
# want of one (rayStartParams may be left out). What the RayJob must set anyway:
#   spec.shutdownAfterJobFinishes: true   KubeRay refuses to suspend a RayJob without it:
#                                          while spec.suspend is true every reconcile fails, so
#                                          one created suspended gets no status at all, and one
#                                          suspended later keeps its RayCluster
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

smoke_setup kuberay-operator ray ray.io_rayclusters.yaml ray.io_rayjobs.yaml
# RayJobs carry KubeRay's finalizer: on exit, delete them while the operator still runs to
# remove it, or the namespace would never go away.
before_controller_stop() {
  kubectl -n "${ns}" delete rayjobs --all --wait --timeout 30s >/dev/null 2>&1 || true
}
apply_crds
start_controller
kubectl create namespace "${ns}" >/dev/null

# pods <cluster>: its pods as <node-type>/<group>, sorted.
pods() {
  kubectl -n "${ns}" get pods -l "ray.io/cluster=$1" -o \
    jsonpath='{range .items[*]}{.metadata.labels.ray\.io/node-type}/{.metadata.labels.ray\.io/group}{"\n"}{end}' |
    sort | tr '\n' ' '
}
pod_names() {
  kubectl -n "${ns}" get pods -l "ray.io/cluster=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' '
}
pod_count() {
  kubectl -n "${ns}" get pods -l "ray.io/cluster=$1" -o name | wc -l
}
# pod_owners <cluster>: each pod's controller owner as <kind>/<name>/<uid>, one per pod.
pod_owners() {
  kubectl -n "${ns}" get pods -l "ray.io/cluster=$1" -o \
    jsonpath='{range .items[*]}{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}/{.metadata.ownerReferences[?(@.controller==true)].uid}{"\n"}{end}' |
    sort -u | tr '\n' ' '
}
cluster_condition() {
  kubectl -n "${ns}" get raycluster smoke \
    -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}"
}

# --- RayCluster: a head and one worker group of two.
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: smoke}
spec:
  headGroupSpec:
    template:
      spec:
        nodeSelector: {nonexistent: "x"}
        containers: [{name: ray-head, image: rayproject/ray:2.46.0}]
  workerGroupSpecs:
  - groupName: workers
    replicas: 2
    minReplicas: 2
    maxReplicas: 2
    template:
      spec:
        nodeSelector: {nonexistent: "x"}
        containers: [{name: ray-worker, image: rayproject/ray:2.46.0}]
YAML

want_pods="head/headgroup worker/workers worker/workers "
expect "RayCluster pods created within 30s" "${want_pods}" "$(poll 30 "${want_pods}" pods smoke)"
((failures == 0)) || finish
cluster_uid="$(kubectl -n "${ns}" get raycluster smoke -o jsonpath='{.metadata.uid}')"
expect "RayCluster pods' controller owner" "RayCluster/smoke/${cluster_uid} " "$(pod_owners smoke)"
expect "RayCluster pod phases" "Pending Pending Pending " "$(kubectl -n "${ns}" get pods \
  -l ray.io/cluster=smoke -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}')"
expect "head service" "smoke-head-svc" "$(kubectl -n "${ns}" get services \
  -l ray.io/cluster=smoke,ray.io/node-type=head -o jsonpath='{.items[*].metadata.name}')"
names_before="$(pod_names smoke)"

# Suspending it deletes its pods (not the head service) and sets RayClusterSuspended.
kubectl -n "${ns}" patch raycluster smoke --type merge -p '{"spec":{"suspend":true}}' >/dev/null
expect "RayCluster pods gone within 30s" "0" "$(poll 30 0 pod_count smoke)"
expect "condition RayClusterSuspended" "True" \
  "$(poll 30 True cluster_condition RayClusterSuspended)"
expect "state suspended" "suspended" \
  "$(kubectl -n "${ns}" get raycluster smoke -o jsonpath='{.status.state}')"

# Resuming it recreates them: the head under its fixed name, the workers under new ones.
kubectl -n "${ns}" patch raycluster smoke --type merge -p '{"spec":{"suspend":false}}' >/dev/null
expect "RayCluster pods back within 30s" "${want_pods}" "$(poll 30 "${want_pods}" pods smoke)"
expect "condition RayClusterSuspended after resume" "False" \
  "$(poll 30 False cluster_condition RayClusterSuspended)"
names_after="$(pod_names smoke)"
expect "head pod name kept" "smoke-head" "$(tr ' ' '\n' <<<"${names_after}" | grep -x smoke-head)"
expect "worker pods renamed" "yes" "$([[ "${names_after}" != "${names_before}" ]] && echo yes ||
  echo no)"

# --- RayJob, created suspended.
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: job}
spec:
  suspend: true
  shutdownAfterJobFinishes: true
  entrypoint: python -c "print(1)"
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          nodeSelector: {nonexistent: "x"}
          containers: [{name: ray-head, image: rayproject/ray:2.46.0}]
    workerGroupSpecs:
    - groupName: workers
      replicas: 1
      minReplicas: 1
      maxReplicas: 1
      template:
        spec:
          nodeSelector: {nonexistent: "x"}
          containers: [{name: ray-worker, image: rayproject/ray:2.46.0}]
YAML
job_status() {
  kubectl -n "${ns}" get rayjob job -o jsonpath='{.status.jobDeploymentStatus}'
}
job_clusters() {
  kubectl -n "${ns}" get rayclusters -l ray.io/originated-from-crd=RayJob \
    -o jsonpath='{range .items[*]}{.metadata.name}{" "}{end}'
}
job_cluster() {
  kubectl -n "${ns}" get rayjob job -o jsonpath='{.status.rayClusterName}'
}
expect "RayJob Suspended within 30s" "Suspended" "$(poll 30 Suspended job_status)"
expect "no RayCluster while suspended" "" "$(job_clusters)"

# Resuming it creates its RayCluster, and that its pods: Pod -> RayCluster -> RayJob.
kubectl -n "${ns}" patch rayjob job --type merge -p '{"spec":{"suspend":false}}' >/dev/null
expect "RayJob Initializing within 30s" "Initializing" "$(poll 30 Initializing job_status)"
cluster="$(job_cluster)"
expect "RayJob's RayCluster created within 30s" "${cluster} " "$(poll 30 "${cluster} " job_clusters)"
((failures == 0)) || finish
job_uid="$(kubectl -n "${ns}" get rayjob job -o jsonpath='{.metadata.uid}')"
expect "RayCluster's controller owner" "RayJob/job/${job_uid}" \
  "$(kubectl -n "${ns}" get raycluster "${cluster}" -o \
    jsonpath='{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}/{.metadata.ownerReferences[?(@.controller==true)].uid}')"
want_job_pods="head/headgroup worker/workers "
expect "RayJob's pods created within 30s" "${want_job_pods}" \
  "$(poll 30 "${want_job_pods}" pods "${cluster}")"
job_cluster_uid="$(kubectl -n "${ns}" get raycluster "${cluster}" -o jsonpath='{.metadata.uid}')"
expect "RayJob's pods' controller owner" "RayCluster/${cluster}/${job_cluster_uid} " \
  "$(pod_owners "${cluster}")"

# Suspending it again deletes the RayCluster (and so its pods).
kubectl -n "${ns}" patch rayjob job --type merge -p '{"spec":{"suspend":true}}' >/dev/null
expect "RayJob Suspended again within 30s" "Suspended" "$(poll 30 Suspended job_status)"
expect "RayJob's RayCluster gone within 30s" "" "$(poll 30 "" job_clusters)"

expect_controller_running
finish
