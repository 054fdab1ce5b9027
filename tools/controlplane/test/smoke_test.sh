#!/usr/bin/env bash
# Smoke test of the test control plane: run by ctest with the "controlplane" fixture, which
# sets CHAMBER_TEST_KUBECONFIG and CHAMBER_TEST_CONTROLPLANE_DIR. Uses kubectl from
# scripts/kube-tools.sh.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ns="chamber-smoke-$$-${RANDOM}"
trap 'kubectl delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true' EXIT

# The apiserver is ready and reports the pinned release.
expect "/readyz" "ok" "$(kubectl get --raw /readyz)"
want_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' \
  "${root}/tools/controlplane/go.mod")"
expect "/version gitVersion" "${want_version}" \
  "$(kubectl get --raw /version | python3 -c \
    'import json, sys; print(json.load(sys.stdin)["gitVersion"])')"
# The upstream gang API is served (GenericWorkload on, scheduling.k8s.io/v1beta1 enabled).
expect "podgroups served" "podgroups" \
  "$(kubectl get --raw /apis/scheduling.k8s.io/v1beta1 | python3 -c \
    'import json, sys; print(" ".join(r["name"] for r in json.load(sys.stdin)["resources"] if r["name"] == "podgroups"))')"
expect "authenticated as" "chamber-admin" \
  "$(kubectl auth whoami -o jsonpath='{.status.userInfo.username}')"

# A namespace round-trips through etcd.
kubectl create namespace "${ns}" >/dev/null
kubectl label namespace "${ns}" chamber.io/smoke=yes >/dev/null
expect "namespace phase" "Active" "$(kubectl get namespace "${ns}" -o jsonpath='{.status.phase}')"
expect "namespace label" "yes" \
  "$(kubectl get namespace "${ns}" -o jsonpath='{.metadata.labels.chamber\.io/smoke}')"

# The Job controller (kube-controller-manager) creates the Job's pod; no kubelet runs it, so it
# stays Pending and the Job counts it as active.
kubectl -n "${ns}" create -f - >/dev/null <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: smoke}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, command: ["true"]}]
YAML
pod=""
deadline=$((SECONDS + 60))
while ((SECONDS < deadline)); do
  pod="$(kubectl -n "${ns}" get pods -l batch.kubernetes.io/job-name=smoke \
    -o jsonpath='{.items[*].metadata.name}')"
  [[ -n "${pod}" ]] && break
  sleep 0.2
done
expect "job pods created within 60s" "1" "$(wc -w <<<"${pod}")"
if [[ -n "${pod}" ]]; then
  expect "pod owner" "Job/smoke" "$(kubectl -n "${ns}" get pod "${pod}" \
    -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')"
  expect "pod phase" "Pending" \
    "$(kubectl -n "${ns}" get pod "${pod}" -o jsonpath='{.status.phase}')"
fi
active=""
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  active="$(kubectl -n "${ns}" get job smoke -o jsonpath='{.status.active}')"
  [[ "${active}" == "1" ]] && break
  sleep 0.2
done
expect "job status.active" "1" "${active}"

# Service-account tokens: TokenRequest issues one, the apiserver authenticates it, and RBAC
# grants the new account nothing.
kubectl -n "${ns}" create serviceaccount smoke >/dev/null
token="$(kubectl -n "${ns}" create token smoke --duration 10m)"
as_sa() {
  KUBECONFIG=/dev/null "${tools}/kubectl" --server "$(kubectl config view --minify \
    -o jsonpath='{.clusters[0].cluster.server}')" \
    --certificate-authority "${CHAMBER_TEST_CONTROLPLANE_DIR}/pki/ca.crt" --token "${token}" "$@"
}
expect "token user" "system:serviceaccount:${ns}:smoke" \
  "$(as_sa auth whoami -o jsonpath='{.status.userInfo.username}')"
expect "RBAC denies list pods" "no" "$(as_sa auth can-i list pods -n "${ns}" 2>/dev/null || true)"

finish
