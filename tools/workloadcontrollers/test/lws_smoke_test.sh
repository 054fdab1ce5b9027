#!/usr/bin/env bash
# Smoke test of the real LeaderWorkerSet controller (scripts/workload-controllers.sh) on the test
# control plane: run by ctest with the "controlplane" fixture, which sets CHAMBER_TEST_KUBECONFIG
# and CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from scripts/kube-tools.sh. StatefulSets need
# kube-controller-manager, so the control plane must run it (the fixture's does). Applies the
# LeaderWorkerSet CRD, starts lws-controller in the background, and checks
#   - that a LeaderWorkerSet of 2 groups of 3 gets its 6 pods (no kubelet runs them, so they stay
#     Pending): leaders <lws>-<group>, workers <lws>-<group>-<worker>;
#   - the owner chains: leader Pod -> StatefulSet <lws> -> LeaderWorkerSet, worker Pod ->
#     StatefulSet <leader pod> -> leader Pod;
#   - the labels LWS puts on its pods (leaderworkerset.sigs.k8s.io/name, group-index,
#     worker-index, group-key shared by a group, template-revision-hash), printed;
#   - restartPolicy RecreateGroupOnPodRestart (the default): a worker pod deleted outright (no
#     kubelet holds it, so it goes at once, after a moment marked deleted) comes back, and
#     whether LWS saw it marked and so recreated the whole group is reported, not checked; a
#     worker pod seen terminating (held by a finalizer) gets its group recreated: the leader pod
#     is deleted (in the foreground) and comes back with new workers, the other group stays.
#
# No webhook runs (see the top of cmd/lws-controller/main.go; the pod webhook's labels are
# added by lws-controller itself). What the LeaderWorkerSet must set for want of the defaulting
# webhook:
#   spec.rolloutStrategy.rollingUpdateConfiguration: {maxUnavailable: 1, maxSurge: 0, partition: 0}
#       without it every reconcile fails on a nil pointer and nothing is created
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

readonly finalizer=chamber.io/lws-smoke-test
smoke_setup lws-controller lws leaderworkerset.x-k8s.io_leaderworkersets.yaml
apply_crds
start_controller
kubectl create namespace "${ns}" >/dev/null

kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: smoke}
spec:
  replicas: 2
  rolloutStrategy:
    type: RollingUpdate
    rollingUpdateConfiguration: {maxUnavailable: 1, maxSurge: 0, partition: 0}
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
      spec:
        nodeSelector: {nonexistent: "x"}
        containers: [{name: worker, image: busybox:1.36, command: [sleep, infinity]}]
YAML

readonly lbl='leaderworkerset\.sigs\.k8s\.io'
pod_names() {
  kubectl -n "${ns}" get pods -l leaderworkerset.sigs.k8s.io/name=smoke \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort | tr '\n' ' '
}
# pod_labels: each pod as <name>/<group-index>/<worker-index>, sorted by name.
pod_labels() {
  kubectl -n "${ns}" get pods -l leaderworkerset.sigs.k8s.io/name=smoke -o \
    jsonpath="{range .items[*]}{.metadata.name}/{.metadata.labels.${lbl}/group-index}/{.metadata.labels.${lbl}/worker-index}{\"\\n\"}{end}" |
    sort -t/ -k1,1 | tr '\n' ' '
}
# owner <kind> <name>: its controller owner as <kind>/<name>/<uid>.
owner() {
  kubectl -n "${ns}" get "$1" "$2" -o \
    jsonpath='{.metadata.ownerReferences[?(@.controller==true)].kind}/{.metadata.ownerReferences[?(@.controller==true)].name}/{.metadata.ownerReferences[?(@.controller==true)].uid}'
}
uid() { kubectl -n "${ns}" get "$1" "$2" -o jsonpath='{.metadata.uid}'; }
label() { kubectl -n "${ns}" get pod "$1" -o jsonpath="{.metadata.labels.${lbl}/$2}"; }

want_pods="smoke-0 smoke-0-1 smoke-0-2 smoke-1 smoke-1-1 smoke-1-2 "
expect "6 pods (2 leaders, 4 workers) within 60s" "${want_pods}" \
  "$(poll 60 "${want_pods}" pod_names)"
want_labels="smoke-0/0/0 smoke-0-1/0/1 smoke-0-2/0/2 smoke-1/1/0 smoke-1-1/1/1 smoke-1-2/1/2 "
expect "pods' group-index/worker-index labels within 30s" "${want_labels}" \
  "$(poll 30 "${want_labels}" pod_labels)"
((failures == 0)) || finish
expect "pod phases" "Pending Pending Pending Pending Pending Pending " "$(kubectl -n "${ns}" \
  get pods -l leaderworkerset.sigs.k8s.io/name=smoke \
  -o jsonpath='{range .items[*]}{.status.phase}{" "}{end}')"
for pod in smoke-0 smoke-0-1; do
  echo "labels of pod ${pod}:"
  kubectl -n "${ns}" get pod "${pod}" -o go-template='{{range $k, $v := .metadata.labels}}  {{$k}}={{$v}}{{"\n"}}{{end}}'
done
expect "name label" "smoke smoke smoke smoke smoke smoke" "$(kubectl -n "${ns}" get pods \
  -l leaderworkerset.sigs.k8s.io/name=smoke -o jsonpath="{.items[*].metadata.labels.${lbl}/name}")"
for group in 0 1; do
  key="$(label "smoke-${group}" group-key)"
  expect "group ${group}'s group-key set and shared by its workers" \
    "yes ${key} ${key}" "$([[ -n "${key}" ]] && echo yes || echo no) $(label \
      "smoke-${group}-1" group-key) $(label "smoke-${group}-2" group-key)"
done

# The owner chains.
lws_uid="$(uid leaderworkerset smoke)"
leader_sts_uid="$(uid statefulset smoke)"
echo "owner chain of leader pod smoke-0: $(owner pod smoke-0) -> $(owner statefulset smoke)"
echo "owner chain of worker pod smoke-0-1: $(owner pod smoke-0-1) -> $(owner statefulset smoke-0)"
for group in 0 1; do
  expect "leader pod smoke-${group}'s owner" "StatefulSet/smoke/${leader_sts_uid}" \
    "$(owner pod "smoke-${group}")"
  worker_sts_uid="$(uid statefulset "smoke-${group}")"
  for worker in 1 2; do
    expect "worker pod smoke-${group}-${worker}'s owner" \
      "StatefulSet/smoke-${group}/${worker_sts_uid}" "$(owner pod "smoke-${group}-${worker}")"
  done
  expect "worker StatefulSet smoke-${group}'s owner" \
    "Pod/smoke-${group}/$(uid pod "smoke-${group}")" "$(owner statefulset "smoke-${group}")"
done
expect "leader StatefulSet's owner" "LeaderWorkerSet/smoke/${lws_uid}" \
  "$(owner statefulset smoke)"

# Deleting a worker pod outright. No kubelet holds it, so the apiserver removes it at once, but
# first marks it deleted (a deletionTimestamp, grace period 0): LWS recreates the group when its
# pod reconciler reads the pod in that moment, else the worker StatefulSet just recreates the
# one pod. Which of the two happened is reported, not checked; the group must be whole again.
leader0="$(uid pod smoke-0)" worker01="$(uid pod smoke-0-1)"
kubectl -n "${ns}" delete pod smoke-0-1 --wait=false >/dev/null
recreated() {
  local now
  now="$(uid pod "$1" 2>/dev/null)"
  [[ -n "${now}" && "${now}" != "$2" ]] && echo yes || echo no
}
expect "deleted worker smoke-0-1 recreated within 30s" "yes" \
  "$(poll 30 yes recreated smoke-0-1 "${worker01}")"
if [[ "$(poll 10 yes recreated smoke-0 "${leader0}")" == yes ]]; then
  echo "deleting worker pod smoke-0-1 outright: LWS recreated the whole group 0 (new leader)"
else
  echo "deleting worker pod smoke-0-1 outright: only it was recreated, leader smoke-0 kept"
fi
expect "6 pods, labelled, within 60s after deleting a worker" "${want_labels}" \
  "$(poll 60 "${want_labels}" pod_labels)"

# A worker pod seen terminating (a finalizer holds it) makes LWS delete the group's leader in
# the foreground: the leader waits for its worker StatefulSet, which waits for the held pod; once
# that goes, the leader StatefulSet recreates the leader and the pod reconciler its workers.
leader0="$(uid pod smoke-0)" leader1="$(uid pod smoke-1)" worker12="$(uid pod smoke-1-2)"
kubectl -n "${ns}" patch pod smoke-1-1 --type merge \
  -p "{\"metadata\":{\"finalizers\":[\"${finalizer}\"]}}" >/dev/null
kubectl -n "${ns}" delete pod smoke-1-1 --wait=false >/dev/null
leader_deleting() {
  kubectl -n "${ns}" get pod smoke-1 -o jsonpath='{.metadata.uid} {.metadata.deletionTimestamp}' |
    awk -v u="${leader1}" '$1 != u || $2 != "" { print "yes"; exit } { print "no" }'
}
leader_deleted="$(poll 30 yes leader_deleting)"
# Let the held pod go before any check can end the test.
kubectl -n "${ns}" patch pod smoke-1-1 --type json \
  -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1 || true
expect "leader smoke-1 deleted within 30s after worker smoke-1-1 terminates" "yes" \
  "${leader_deleted}"
expect "leader smoke-1 recreated within 60s" "yes" "$(poll 60 yes recreated smoke-1 "${leader1}")"
expect "group 1's other worker smoke-1-2 recreated too" "yes" \
  "$(poll 30 yes recreated smoke-1-2 "${worker12}")"
expect "6 pods, labelled, within 60s after the group restart" "${want_labels}" \
  "$(poll 60 "${want_labels}" pod_labels)"
expect "leader smoke-0 of the other group kept (uid)" "${leader0}" "$(uid pod smoke-0)"
echo "worker pod smoke-1-1 seen terminating: the whole group 1 was recreated"

expect_controller_running
finish
