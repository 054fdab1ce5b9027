#!/usr/bin/env bash
# Tests of the Helm chart deploy/helm/chamber (docs/install.md).
#
#   chart_test.sh lint    helm lint --strict; helm template for the defaults and every example
#                         in deploy/helm/chamber/examples; values.schema.json refusing bad
#                         values; the rendered objects, arguments and RBAC rules per mode; where
#                         the agents push (the release's chamberd Service by default,
#                         agent.chamberdUrl, nowhere without chamberd); the history's volumes;
#                         the admission webhook's entries, Service, certificate (Helm's or
#                         cert-manager's) and chamberd's flags for it; the leader fence's
#                         admission policy.
#   chart_test.sh apply   against the test control plane (CHAMBER_TEST_CONTROLPLANE_DIR): the
#                         rendered manifests through a server-side dry run, then helm install
#                         into a fresh namespace; kubectl auth can-i as chamberd's, the agent's
#                         and the dashboard's service accounts (every verb chamberd uses allowed,
#                         others denied) in scheduling mode; the admission webhook (fail closed
#                         for a labelled pod with no replica to answer, unlabelled pods admitted,
#                         its certificate kept across an upgrade, served by chamberd; the
#                         leader fence passing chamberd's bind, refusing a stale term), then after
#                         helm upgrade to monitoring mode (no webhook); helm uninstall; with a
#                         default StorageClass, volume
#                         claims per replica, kept on upgrade and after uninstall; one
#                         time-to-dashboard run (below), which must stay under 180 s.
#   chart_test.sh cert-manager  against the test control plane, with cert-manager's
#                         controllers and CA injector (scripts/workload-controllers.sh builds
#                         them) and its CRDs for this run only: the webhook's certificate issued
#                         from the release's CA, injected, served by chamberd, renewed without a
#                         change of the caBundle (run_cert_manager below).
#   chart_test.sh timing [N]  time to first dashboard, N runs (default 3) and their median:
#                         from `helm install` to the first /api/v1/fleet answer listing the
#                         fake GPU nodes' GPUs (docs/install.md). scripts/time-to-dashboard.sh
#                         runs it on a control plane of its own.
#
# Tools: CHAMBER_HELM and CHAMBER_KUBECTL, else scripts/kube-tools.sh path. CHAMBER_CLI (the
# chamber binary), when set and present, also checks the rendered engine configuration.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
chart="${root}/deploy/helm/chamber"
mode="${1:-}"

failures=0
checks=0
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}
pass() { checks=$((checks + 1)); }
die() {
  printf 'chart_test: %s\n' "$*" >&2
  exit 2
}

# expect_eq <what> <want> <got>
expect_eq() {
  if [[ "$2" == "$3" ]]; then pass; else fail "$1: want '$2', got '$3'"; fi
}
# expect_contains <what> <needle> <haystack>
expect_contains() {
  if [[ "$3" == *"$2"* ]]; then pass; else fail "$1: '$2' not in: $3"; fi
}
expect_not_contains() {
  if [[ "$3" != *"$2"* ]]; then pass; else fail "$1: '$2' unexpectedly in output"; fi
}

tools_dir() { "${root}/scripts/kube-tools.sh" path 2>/dev/null || true; }
# elapsed <from> <to>: seconds between two `date +%s.%N` readings, one decimal.
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

if [[ "${mode}" == apply || "${mode}" == timing || "${mode}" == cert-manager ]]; then
  [[ -n "${CHAMBER_TEST_CONTROLPLANE_DIR:-}" && -f "${CHAMBER_TEST_CONTROLPLANE_DIR}/env" ]] ||
    die "${mode}: CHAMBER_TEST_CONTROLPLANE_DIR/env is missing (run through ctest, fixture controlplane)"
  # shellcheck disable=SC1091
  source "${CHAMBER_TEST_CONTROLPLANE_DIR}/env"
fi
helm="${CHAMBER_HELM:-$(tools_dir)/helm}"
kubectl="${CHAMBER_KUBECTL:-$(tools_dir)/kubectl}"
[[ -x "${helm}" ]] || die "helm not found: run scripts/install-deps.sh (or scripts/kube-tools.sh)"
command -v python3 >/dev/null || die "python3 is needed"
python3 -c 'import yaml' 2>/dev/null || die "python3's yaml module is needed (python3-yaml)"

work="$(mktemp -d)"
cleanup_steps=()
cleanup() {
  local step
  for step in "${cleanup_steps[@]}"; do eval "${step}" || true; done
  rm -rf "${work}"
}
trap cleanup EXIT

# query <manifests.yaml> <python expression over `docs` (list of objects) and `find(kind, name)`>
query() {
  python3 - "$1" "$2" <<'EOF'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def find(kind, name=None):
    hits = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    if len(hits) != 1:
        sys.exit(f"expected one {kind} {name or ''}, found {len(hits)}")
    return hits[0]
def rules(kind, name):
    out = set()
    for r in find(kind, name).get("rules", []):
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r.get("verbs", []):
                    names = r.get("resourceNames")
                    out.add(f"{v} {res}{'.' + g if g else ''}" + (f"/{','.join(names)}" if names else ""))
    return " ".join(sorted(out))
val = eval(sys.argv[2])
print(val if isinstance(val, str) else json.dumps(val, sort_keys=True))
EOF
}

# The rules of a mode, as "verb resource[.group][/names]" sorted: exactly what chamberd calls.
common_rules="create events create tokenreviews.authentication.k8s.io get nodes list jaxjobs.kubeflow.org list jobs.batch list jobsets.jobset.x-k8s.io list leaderworkersets.leaderworkerset.x-k8s.io list mpijobs.kubeflow.org list mxjobs.kubeflow.org list namespaces list nodes list paddlejobs.kubeflow.org list podgroups.scheduling.k8s.io list pods list priorityclasses.scheduling.k8s.io list pytorchjobs.kubeflow.org list queues.chamber.io list rayclusters.ray.io list rayjobs.ray.io list tfjobs.kubeflow.org list trainjobs.trainer.kubeflow.org list workloads.scheduling.k8s.io list xgboostjobs.kubeflow.org patch nodes patch nodes/status patch pods/status patch queues/status.chamber.io watch jaxjobs.kubeflow.org watch jobs.batch watch jobsets.jobset.x-k8s.io watch leaderworkersets.leaderworkerset.x-k8s.io watch mpijobs.kubeflow.org watch mxjobs.kubeflow.org watch namespaces watch nodes watch paddlejobs.kubeflow.org watch podgroups.scheduling.k8s.io watch pods watch priorityclasses.scheduling.k8s.io watch pytorchjobs.kubeflow.org watch queues.chamber.io watch rayclusters.ray.io watch rayjobs.ray.io watch tfjobs.kubeflow.org watch trainjobs.trainer.kubeflow.org watch workloads.scheduling.k8s.io watch xgboostjobs.kubeflow.org"
sched_rules="create events create pods create pods/binding create pods/eviction create tokenreviews.authentication.k8s.io delete pods get cronjobs.batch get daemonsets.apps get deployments.apps get jaxjobs.kubeflow.org get jobs.batch get jobsets.jobset.x-k8s.io get leaderworkersets.leaderworkerset.x-k8s.io get mpijobs.kubeflow.org get mxjobs.kubeflow.org get namespaces get nodes get paddlejobs.kubeflow.org get podgroups.scheduling.k8s.io get pods get pytorchjobs.kubeflow.org get rayclusters.ray.io get rayjobs.ray.io get replicasets.apps get statefulsets.apps get tfjobs.kubeflow.org get trainjobs.trainer.kubeflow.org get workloads.scheduling.k8s.io get xgboostjobs.kubeflow.org list jaxjobs.kubeflow.org list jobs.batch list jobsets.jobset.x-k8s.io list leaderworkersets.leaderworkerset.x-k8s.io list mpijobs.kubeflow.org list mxjobs.kubeflow.org list namespaces list nodes list paddlejobs.kubeflow.org list podgroups.scheduling.k8s.io list pods list priorityclasses.scheduling.k8s.io list pytorchjobs.kubeflow.org list queues.chamber.io list rayclusters.ray.io list rayjobs.ray.io list tfjobs.kubeflow.org list trainjobs.trainer.kubeflow.org list workloads.scheduling.k8s.io list xgboostjobs.kubeflow.org patch jaxjobs.kubeflow.org patch jobs.batch patch jobsets.jobset.x-k8s.io patch mpijobs.kubeflow.org patch mxjobs.kubeflow.org patch nodes patch nodes/status patch paddlejobs.kubeflow.org patch podgroups/status.scheduling.k8s.io patch pods/status patch pytorchjobs.kubeflow.org patch queues/status.chamber.io patch rayclusters.ray.io patch rayjobs.ray.io patch tfjobs.kubeflow.org patch trainjobs.trainer.kubeflow.org patch xgboostjobs.kubeflow.org watch jaxjobs.kubeflow.org watch jobs.batch watch jobsets.jobset.x-k8s.io watch leaderworkersets.leaderworkerset.x-k8s.io watch mpijobs.kubeflow.org watch mxjobs.kubeflow.org watch namespaces watch nodes watch paddlejobs.kubeflow.org watch podgroups.scheduling.k8s.io watch pods watch priorityclasses.scheduling.k8s.io watch pytorchjobs.kubeflow.org watch queues.chamber.io watch rayclusters.ray.io watch rayjobs.ray.io watch tfjobs.kubeflow.org watch trainjobs.trainer.kubeflow.org watch workloads.scheduling.k8s.io watch xgboostjobs.kubeflow.org"

run_lint() {
  local out f n

  # helm lint, strict, for the defaults and each example.
  out="$("${helm}" lint --strict "${chart}" 2>&1)" || fail "helm lint --strict: ${out}"
  expect_contains "helm lint" "1 chart(s) linted, 0 chart(s) failed" "${out}"
  local examples=("${chart}"/examples/*.yaml)
  [[ ${#examples[@]} -ge 3 ]] || fail "expected at least 3 examples, found ${#examples[@]}"
  for f in "${examples[@]}"; do
    out="$("${helm}" lint --strict "${chart}" -f "${f}" 2>&1)" || fail "helm lint -f ${f}: ${out}"
    expect_contains "helm lint -f $(basename "${f}")" "0 chart(s) failed" "${out}"
  done

  # Defaults: monitoring mode, every object of the chart.
  "${helm}" template chamber "${chart}" -n chamber-system >"${work}/default.yaml" ||
    fail "helm template (defaults)"
  expect_eq "kinds (defaults)" \
    '["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "PodDisruptionBudget", "Role", "RoleBinding", "Service", "Service", "Service", "ServiceAccount", "ServiceAccount", "ServiceAccount", "StatefulSet"]' \
    "$(query "${work}/default.yaml" 'sorted(d["kind"] for d in docs)')"
  expect_eq "service accounts" '["chamber", "chamber-agent", "chamber-dashboard"]' \
    "$(query "${work}/default.yaml" 'sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount")')"
  expect_eq "monitoring rules" "${common_rules}" "$(query "${work}/default.yaml" 'rules("ClusterRole", "chamber")')"
  expect_not_contains "monitoring mode" "pods/binding" "$(cat "${work}/default.yaml")"
  expect_eq "lease role" "create leases.coordination.k8s.io get leases.coordination.k8s.io/chamber-scheduler patch pods update leases.coordination.k8s.io/chamber-scheduler" \
    "$(query "${work}/default.yaml" 'rules("Role", "chamber-leader-election")')"
  expect_eq "lease role namespace" "chamber-system" \
    "$(query "${work}/default.yaml" 'find("Role")["metadata"]["namespace"]')"
  local args='find("StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]'
  expect_eq "chamberd args (defaults)" \
    '["--leader-elect", "--lease-namespace", "chamber-system", "--lease-name", "chamber-scheduler", "--listen", "0.0.0.0:8080", "--health-listen", "0.0.0.0:8081", "--config", "/etc/chamber/chamber.yaml", "--scheduler-name", "chamber-disabled", "--kube-api-qps", "200", "--kube-api-burst", "400", "--writers", "16", "--share-memory-grace", "60", "--gpu-reservations=true", "--gpu-reservation-grace", "10", "--gpu-reservation-image", "registry.k8s.io/pause:3.10", "--admin-group", "chamber:admins", "--admin-group", "system:masters", "--viewer-group", "chamber:viewers", "--viewer-group", "system:serviceaccounts:chamber-system", "--agent-user", "system:serviceaccount:chamber-system:chamber-agent", "--data-dir", "/var/lib/chamber", "--history-follow-url", "http://chamber.chamber-system.svc:80", "--replica-user", "system:serviceaccount:chamber-system:chamber", "--log-level", "info", "--log-json"]' \
    "$(query "${work}/default.yaml" "${args}")"
  local pod='find("StatefulSet")["spec"]["template"]["spec"]'
  expect_eq "replicas" "2" "$(query "${work}/default.yaml" 'find("StatefulSet")["spec"]["replicas"]')"
  expect_eq "update strategy, pod management, governing Service" '[{"type": "RollingUpdate"}, "Parallel", "chamber-replicas"]' \
    "$(query "${work}/default.yaml" '[find("StatefulSet")["spec"][k] for k in ("updateStrategy", "podManagementPolicy", "serviceName")]')"
  # The governing Service: headless, every replica ready or not.
  expect_eq "replicas service" '{"clusterIP": "None", "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "targetPort": "http"}, {"name": "health", "port": 8081, "protocol": "TCP", "targetPort": "health"}], "publishNotReadyAddresses": true, "selector": {"app.kubernetes.io/component": "chamberd", "app.kubernetes.io/instance": "chamber", "app.kubernetes.io/name": "chamber"}}' \
    "$(query "${work}/default.yaml" 'find("Service", "chamber-replicas")["spec"]')"
  expect_eq "replicas service selects the StatefulSet's pods" "True" \
    "$(query "${work}/default.yaml" 'str(find("Service", "chamber-replicas")["spec"]["selector"] == find("StatefulSet")["spec"]["selector"]["matchLabels"])')"
  expect_eq "POD_NAMESPACE" '{"fieldRef": {"fieldPath": "metadata.namespace"}}' \
    "$(query "${work}/default.yaml" "[e['valueFrom'] for e in ${pod}['containers'][0]['env'] if e['name'] == 'POD_NAMESPACE'][0]")"
  expect_eq "chamberd security context" \
    '{"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true, "runAsGroup": 65532, "runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}' \
    "$(query "${work}/default.yaml" "${pod}['containers'][0]['securityContext']")"
  expect_eq "readiness probe" '{"path": "/readyz", "port": "health"}' \
    "$(query "${work}/default.yaml" "${pod}['containers'][0]['readinessProbe']['httpGet']")"
  expect_eq "liveness probe" '{"path": "/healthz", "port": "health"}' \
    "$(query "${work}/default.yaml" "${pod}['containers'][0]['livenessProbe']['httpGet']")"
  expect_eq "chamberd ports" '[{"containerPort": 8080, "name": "http", "protocol": "TCP"}, {"containerPort": 8081, "name": "health", "protocol": "TCP"}]' \
    "$(query "${work}/default.yaml" "${pod}['containers'][0]['ports']")"
  expect_eq "chamberd service account" "chamber" "$(query "${work}/default.yaml" "${pod}['serviceAccountName']")"
  expect_eq "service" '[{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]' \
    "$(query "${work}/default.yaml" 'find("Service", "chamber")["spec"]["ports"]')"
  expect_eq "service type" "ClusterIP" "$(query "${work}/default.yaml" 'find("Service", "chamber")["spec"]["type"]')"
  # The Service reaches the StatefulSet's pods, and of them only the one labelled the leader.
  expect_eq "service selector" '{"app.kubernetes.io/component": "chamberd", "app.kubernetes.io/instance": "chamber", "app.kubernetes.io/name": "chamber", "chamber.io/leader": "true"}' \
    "$(query "${work}/default.yaml" 'find("Service", "chamber")["spec"]["selector"]')"
  expect_eq "service selects the StatefulSet's pods but the leader label" "True" \
    "$(query "${work}/default.yaml" 'str({k: v for k, v in find("Service", "chamber")["spec"]["selector"].items() if k != "chamber.io/leader"}.items() <= find("StatefulSet")["spec"]["template"]["metadata"]["labels"].items())')"
  expect_eq "POD_NAME" '{"fieldRef": {"fieldPath": "metadata.name"}}' \
    "$(query "${work}/default.yaml" "[e['valueFrom'] for e in ${pod}['containers'][0]['env'] if e['name'] == 'POD_NAME'][0]")"
  expect_eq "agent metrics service" '{"clusterIP": "None", "ports": [{"name": "metrics", "port": 9401, "protocol": "TCP", "targetPort": "metrics"}], "selector": {"app.kubernetes.io/component": "agent", "app.kubernetes.io/instance": "chamber", "app.kubernetes.io/name": "chamber"}}' \
    "$(query "${work}/default.yaml" 'find("Service", "chamber-agent")["spec"]')"
  expect_eq "agent metrics service selects the DaemonSet's pods" "True" \
    "$(query "${work}/default.yaml" 'str(find("Service", "chamber-agent")["spec"]["selector"].items() <= find("DaemonSet")["spec"]["template"]["metadata"]["labels"].items())')"
  expect_eq "pdb" "1" "$(query "${work}/default.yaml" 'find("PodDisruptionBudget")["spec"]["minAvailable"]')"
  # One replica: no PDB (it would refuse every eviction, so every drain of that node).
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.replicas=1 >"${work}/one.yaml" ||
    fail "helm template (one replica)"
  expect_eq "no pdb with one replica" "0" "$(query "${work}/one.yaml" 'sum(d["kind"] == "PodDisruptionBudget" for d in docs)')"
  expect_eq "no liveness probe when off" "False" "$("${helm}" template chamber "${chart}" \
    --set chamberd.livenessProbe=false | python3 -c 'import sys, yaml; d = [x for x in yaml.safe_load_all(sys.stdin) if x and x["kind"] == "StatefulSet"][0]; print("livenessProbe" in d["spec"]["template"]["spec"]["containers"][0])')"
  expect_eq "config (defaults)" "{}" \
    "$(query "${work}/default.yaml" 'find("ConfigMap")["data"]["chamber.yaml"].strip()')"
  local ds='find("DaemonSet")["spec"]["template"]["spec"]'
  expect_eq "agent node selector" '{"nvidia.com/gpu.present": "true"}' \
    "$(query "${work}/default.yaml" "${ds}['nodeSelector']")"
  expect_eq "agent tolerations" '[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]' \
    "$(query "${work}/default.yaml" "${ds}['tolerations']")"
  expect_eq "agent args" \
    '["--listen", "0.0.0.0:9401", "--nvml-library", "/host/nvml/libnvidia-ml.so.1", "--kernel-log", "", "--interval", "1", "--pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "--host-proc", "/host/proc", "--chamberd-url", "http://chamber.chamber-system.svc:80/api/v1/agent/reports", "--log-level", "info", "--log-json"]' \
    "$(query "${work}/default.yaml" "${ds}['containers'][0]['args']")"
  # The host's /proc, read-only, for the pod of each GPU process.
  expect_eq "agent host /proc" '[{"path": "/proc", "type": "Directory"}, {"mountPath": "/host/proc", "name": "host-proc", "readOnly": true}]' \
    "$(query "${work}/default.yaml" "[[v['hostPath'] for v in ${ds}['volumes'] if v['name'] == 'host-proc'][0], [m for m in ${ds}['containers'][0]['volumeMounts'] if m['name'] == 'host-proc'][0]]")"
  # The kubelet's pod-resources socket: its directory read-only, and root without capabilities.
  expect_eq "agent pod-resources hostPath" '{"path": "/var/lib/kubelet/pod-resources", "type": "Directory"}' \
    "$(query "${work}/default.yaml" "[v['hostPath'] for v in ${ds}['volumes'] if v['name'] == 'pod-resources'][0]")"
  expect_eq "agent pod-resources mount" '{"mountPath": "/var/lib/kubelet/pod-resources", "name": "pod-resources", "readOnly": true}' \
    "$(query "${work}/default.yaml" "[m for m in ${ds}['containers'][0]['volumeMounts'] if m['name'] == 'pod-resources'][0]")"
  expect_eq "agent security context (pod resources)" \
    '{"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true, "runAsGroup": 0, "runAsNonRoot": false, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}' \
    "$(query "${work}/default.yaml" "${ds}['containers'][0]['securityContext']")"
  "${helm}" template chamber "${chart}" -n chamber-system --set agent.podResources.enabled=false \
    >"${work}/no-pod-resources.yaml" || fail "helm template (agent.podResources.enabled=false)"
  expect_eq "agent without pod resources: socket flag" '""' \
    "$(query "${work}/no-pod-resources.yaml" "json.dumps(${ds}['containers'][0]['args'][${ds}['containers'][0]['args'].index('--pod-resources-socket') + 1])")"
  expect_eq "agent without pod resources: user and volumes" '[65532, true, ["nvml", "host-proc"]]' \
    "$(query "${work}/no-pod-resources.yaml" "[${ds}['containers'][0]['securityContext']['runAsUser'], ${ds}['containers'][0]['securityContext']['runAsNonRoot'], [v['name'] for v in ${ds}['volumes']]]")"
  expect_eq "agent nvml hostPath" '{"path": "/usr/lib/x86_64-linux-gnu", "type": "Directory"}' \
    "$(query "${work}/default.yaml" "[v['hostPath'] for v in ${ds}['volumes'] if v['name'] == 'nvml'][0]")"
  check_agent_push
  check_api_tls

  # History: each replica's own emptyDir unless a volume claim is asked for (auto, the default,
  # asks the cluster for a default StorageClass: helm template has none to ask).
  check_history_volumes

  expect_eq "agent not privileged" "False" \
    "$(query "${work}/default.yaml" "str(${ds}['containers'][0]['securityContext'].get('privileged', False))")"

  # Scheduling mode: the scheduler name and the scheduling rules.
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    >"${work}/scheduling.yaml" || fail "helm template (scheduling)"
  expect_eq "scheduling rules" "${sched_rules}" "$(query "${work}/scheduling.yaml" 'rules("ClusterRole", "chamber")')"
  expect_eq "scheduler name (scheduling)" "chamber" \
    "$(query "${work}/scheduling.yaml" "${args}[${args}.index('--scheduler-name') + 1]")"

  check_webhook
  check_leader_fence

  # Every example renders; the tuned one carries its values through.
  for f in "${examples[@]}"; do
    n="$(basename "${f}" .yaml)"
    "${helm}" template chamber "${chart}" -n chamber-system -f "${f}" \
      --api-versions monitoring.coreos.com/v1 >"${work}/${n}.yaml" || fail "helm template -f ${f}"
    expect_eq "${n}: one StatefulSet" "1" "$(query "${work}/${n}.yaml" 'sum(d["kind"] == "StatefulSet" for d in docs)')"
  done
  expect_eq "tuned: replicas" "3" "$(query "${work}/scheduling-tuned.yaml" 'find("StatefulSet")["spec"]["replicas"]')"
  expect_eq "tuned: qps" "1000" "$(query "${work}/scheduling-tuned.yaml" "${args}[${args}.index('--kube-api-qps') + 1]")"
  expect_eq "tuned: groups" '["--admin-group", "platform:gpu-admins", "--viewer-group", "platform:ml-engineers"]' \
    "$(query "${work}/scheduling-tuned.yaml" "[a for i, a in enumerate(${args}) if a.endswith('-group') or ${args}[i - 1].endswith('-group')]")"
  expect_eq "tuned: no dashboard account" "0" \
    "$(query "${work}/scheduling-tuned.yaml" 'sum(d["metadata"]["name"] == "chamber-dashboard" for d in docs)')"
  expect_eq "tuned: agent node selector" '{"node-pool": "gpu"}' "$(query "${work}/scheduling-tuned.yaml" "${ds}['nodeSelector']")"
  expect_eq "tuned: runtime class" "nvidia" "$(query "${work}/scheduling-tuned.yaml" "${ds}['runtimeClassName']")"
  expect_eq "tuned: config" '{"cyclePeriod": "500ms", "fairShare": {"usageHalfLife": "24h", "usageWeight": 0.5}, "preemption": {"checkpointGraceSeconds": 120, "minRuntime": "10m"}, "pricing": {"defaultPricePerGpuHour": 2, "rules": [{"gpuModel": "NVIDIA-H100-80GB-HBM3", "nodeSelector": {"karpenter.sh/capacity-type": "spot"}, "pricePerGpuHour": 3.4}, {"gpuModel": "NVIDIA-H100-80GB-HBM3", "pricePerGpuHour": 12.29}]}, "queueOrder": "DominantShare"}' \
    "$(query "${work}/scheduling-tuned.yaml" 'yaml.safe_load(find("ConfigMap")["data"]["chamber.yaml"])')"
  expect_eq "prometheus: ServiceMonitor" '{"authorization": {"credentials": {"key": "token", "name": "chamber-metrics-token"}, "type": "Bearer"}, "interval": "15s", "path": "/metrics", "port": "http"}' \
    "$(query "${work}/monitoring-prometheus.yaml" 'find("ServiceMonitor", "chamber")["spec"]["endpoints"][0]')"
  expect_eq "prometheus: agent ServiceMonitor" '{"endpoints": [{"interval": "15s", "path": "/metrics", "port": "metrics", "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]}], "namespaceSelector": {"matchNames": ["chamber-system"]}, "selector": {"matchLabels": {"app.kubernetes.io/component": "agent", "app.kubernetes.io/instance": "chamber", "app.kubernetes.io/name": "chamber"}}}' \
    "$(query "${work}/monitoring-prometheus.yaml" 'find("ServiceMonitor", "chamber-agent")["spec"]')"
  # Each chamberd ServiceMonitor selects one Service, with the port it scrapes: the leader's API
  # (fleet metrics), and every replica's health port (its own metrics, the webhook's counters).
  expect_eq "prometheus: chamberd ServiceMonitors select one Service each" \
    '[["chamber", ["chamber"], "http"], ["chamber-replicas", ["chamber-replicas"], "health"]]' \
    "$(query "${work}/monitoring-prometheus.yaml" '[[m["metadata"]["name"], [s["metadata"]["name"] for s in docs if s["kind"] == "Service" and m["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items() and m["spec"]["endpoints"][0]["port"] in [p["name"] for p in s["spec"]["ports"]]], m["spec"]["endpoints"][0]["port"]] for m in docs if m["kind"] == "ServiceMonitor" and m["metadata"]["name"] != "chamber-agent"]')"
  expect_eq "prometheus: replicas ServiceMonitor" '{"interval": "15s", "path": "/metrics", "port": "health"}' \
    "$(query "${work}/monitoring-prometheus.yaml" 'find("ServiceMonitor", "chamber-replicas")["spec"]["endpoints"][0]')"
  expect_eq "prometheus: agent ServiceMonitor labels" "prometheus" \
    "$(query "${work}/monitoring-prometheus.yaml" 'find("ServiceMonitor", "chamber-agent")["metadata"]["labels"]["release"]')"
  check_grafana_dashboard "${work}/monitoring-prometheus.yaml"
  expect_eq "prometheus: kernel log" '["--kernel-log", "/dev/kmsg", true]' \
    "$(query "${work}/monitoring-prometheus.yaml" "[${ds}['containers'][0]['args'][4], ${ds}['containers'][0]['args'][5], ${ds}['containers'][0]['securityContext']['privileged']]")"

  # The engine configuration as chamberd reads it.
  if [[ -n "${CHAMBER_CLI:-}" && -x "${CHAMBER_CLI}" ]]; then
    for n in default scheduling-tuned; do
      query "${work}/${n}.yaml" 'find("ConfigMap")["data"]["chamber.yaml"]' >"${work}/${n}-config.yaml"
      out="$("${CHAMBER_CLI}" config check "${work}/${n}-config.yaml" 2>&1)" ||
        fail "chamber config check (${n}): ${out}"
      expect_contains "chamber config check (${n})" "queueOrder:" "${out}"
    done
    expect_contains "chamber config check (scheduling-tuned): pricing" "    pricePerGpuHour: 12.29" "${out}"
  else
    printf 'chart_test: CHAMBER_CLI not set: the engine configuration is not checked by chamber\n'
  fi

  # values.schema.json refuses bad values, naming the field.
  local bad
  while IFS='|' read -r bad want; do
    if out="$("${helm}" template chamber "${chart}" ${bad} 2>&1)"; then
      fail "schema accepted ${bad}"
    else
      expect_contains "schema: ${bad}" "${want}" "${out}"
    fi
  done <<'EOF'
--set mode=bogus|at '/mode': value must be one of 'monitoring', 'scheduling'
--set chamberd.replicas=0|at '/chamberd/replicas': minimum: got 0, want 1
--set chamberd.bogus=1|at '/chamberd': additional properties 'bogus' not allowed
--set chamberd.writers=300|at '/chamberd/writers': maximum: got 300, want 256
--set chamberd.shareMemoryGraceSeconds=-1|at '/chamberd/shareMemoryGraceSeconds': minimum: got -1, want 0
--set chamberd.gpuReservations.graceSeconds=-5|at '/chamberd/gpuReservations/graceSeconds': minimum: got -5, want 0
--set config.queueOrder=Random|at '/config/queueOrder': value must be one of 'FairShare', 'DominantShare', 'OldestHead'
--set config.preemption.minRuntime=soon|at '/config/preemption/minRuntime'
--set config.typo=1|at '/config': additional properties 'typo' not allowed
--set config.pricing.defaultPricePerGpuHour=-1|at '/config/pricing/defaultPricePerGpuHour': minimum: got -1, want 0
--set config.pricing.rules[0].pricing=preemptible|at '/config/pricing/rules/0/pricing': value must be one of 'on-demand', 'spot', 'reserved'
--set agent.nvml.hostPath=relative/lib|at '/agent/nvml/hostPath'
--set chamberd.logLevel=verbose|at '/chamberd/logLevel': value must be one of
--set-string service.port=http|at '/service/port': got string, want integer
--set grafana.dashboard.bogus=1|at '/grafana/dashboard': additional properties 'bogus' not allowed
--set agent.serviceMonitor.interval=often|at '/agent/serviceMonitor/interval'
--set chamberd.persistence.enabled=maybe|at '/chamberd/persistence/enabled': value must be one of 'auto', true, false
--set chamberd.persistence.size=lots|at '/chamberd/persistence/size'
--set chamberd.enabled=no|at '/chamberd/enabled': got string, want boolean
--set webhook.timeoutSeconds=60|at '/webhook/timeoutSeconds': maximum: got 60, want 30
--set webhook.certificate.source=vault|at '/webhook/certificate/source': value must be one of 'auto', 'helm', 'cert-manager'
--set webhook.certificate.validityDays=10|at '/webhook/certificate/validityDays': minimum: got 10, want 60
--set webhook.certificate.caValidityDays=30|at '/webhook/certificate/caValidityDays': minimum: got 30, want 60
--set webhook.excludeNamespaces[0]=Kube_System|at '/webhook/excludeNamespaces/0'
--set webhook.workloads.rules[0].operations[0]=UPDATE|at '/webhook/workloads/rules/0/operations/0'
--set webhook.bogus=1|at '/webhook': additional properties 'bogus' not allowed
EOF
  # A ServiceMonitor on a cluster without prometheus-operator is refused, with the reason.
  if out="$("${helm}" template chamber "${chart}" --set serviceMonitor.enabled=true 2>&1)"; then
    fail "serviceMonitor without monitoring.coreos.com/v1 rendered"
  else
    expect_contains "serviceMonitor without the API" "the cluster has no monitoring.coreos.com/v1 API" "${out}"
  fi
  if out="$("${helm}" template chamber "${chart}" --set agent.serviceMonitor.enabled=true 2>&1)"; then
    fail "agent.serviceMonitor without monitoring.coreos.com/v1 rendered"
  else
    expect_contains "agent.serviceMonitor without the API" "agent.serviceMonitor.enabled: the cluster has no monitoring.coreos.com/v1 API" "${out}"
  fi
  # The dashboard's own namespace, and none unless enabled.
  expect_eq "no dashboard by default" "0" \
    "$(query "${work}/default.yaml" 'sum(d["metadata"].get("labels", {}).get("grafana_dashboard") == "1" for d in docs)')"
  "${helm}" template chamber "${chart}" -n chamber-system --set grafana.dashboard.enabled=true \
    --set grafana.dashboard.namespace=monitoring >"${work}/grafana-ns.yaml" || fail "helm template (grafana namespace)"
  expect_eq "dashboard namespace" "monitoring" \
    "$(query "${work}/grafana-ns.yaml" 'find("ConfigMap", "chamber-grafana-dashboard")["metadata"]["namespace"]')"
}

# check_leader_fence: the ValidatingAdmissionPolicy that refuses a deposed leader's binds
# (docs/reliability.md#fencing-a-deposed-leader): in scheduling mode where the cluster serves
# ValidatingAdmissionPolicy, bound to the release's Lease as its parameter; none in monitoring
# mode, with chamberd.leaderFence=false, or without the API.
check_leader_fence() {
  local f="${work}/fence.yaml" vap='find("ValidatingAdmissionPolicy", "chamber-leader-fence")'
  local vapi=(--api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy)
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    "${vapi[@]}" >"${f}" || fail "helm template (leader fence)"
  expect_eq "leader fence: parameter, rules, failure policy, reason" '[{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}, [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/binding"]}], "Fail", "Forbidden"]' \
    "$(query "${f}" "[${vap}['spec']['paramKind'], ${vap}['spec']['matchConstraints']['resourceRules'], ${vap}['spec']['failurePolicy'], ${vap}['spec']['validations'][0]['reason']]")"
  expect_contains "leader fence: only this release's bindings" \
    "object.metadata.annotations['chamber.io/leader-lease'] == 'chamber-system/chamber-scheduler'" \
    "$(query "${f}" "${vap}['spec']['matchConditions'][0]['expression']")"
  expect_eq "leader fence: binding" '["chamber-leader-fence", ["Deny"], {"name": "chamber-scheduler", "namespace": "chamber-system", "parameterNotFoundAction": "Allow"}]' \
    "$(query "${f}" '[find("ValidatingAdmissionPolicyBinding", "chamber-leader-fence")["spec"][k] for k in ("policyName", "validationActions", "paramRef")]')"
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    "${vapi[@]}" --set chamberd.leaseName=sched-lease >"${work}/fence-lease.yaml" ||
    fail "helm template (leader fence, leaseName)"
  expect_eq "leader fence: follows chamberd.leaseName" '["sched-lease", true]' \
    "$(query "${work}/fence-lease.yaml" "[find('ValidatingAdmissionPolicyBinding')['spec']['paramRef']['name'], \"'chamber-system/sched-lease'\" in ${vap}['spec']['matchConditions'][0]['expression']]")"
  local none='sum(d["kind"].startswith("ValidatingAdmissionPolicy") for d in docs)'
  expect_eq "leader fence: none without the API" "0" "$(query "${work}/scheduling.yaml" "${none}")"
  "${helm}" template chamber "${chart}" -n chamber-system "${vapi[@]}" >"${work}/fence-monitoring.yaml" ||
    fail "helm template (leader fence, monitoring)"
  expect_eq "leader fence: none in monitoring mode" "0" "$(query "${work}/fence-monitoring.yaml" "${none}")"
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    "${vapi[@]}" --set chamberd.leaderFence=false >"${work}/fence-off.yaml" ||
    fail "helm template (leaderFence=false)"
  expect_eq "leader fence: none when disabled" "0" "$(query "${work}/fence-off.yaml" "${none}")"
}

# check_webhook: the admission webhook (docs/admission.md) in scheduling mode: its entries (the
# ones that see the queue label fail closed, the rest are ignored when no replica answers), the
# Service over every replica, Helm's CA and certificate for the Service's host, chamberd's
# arguments, port and volume; none in monitoring mode or with webhook.enabled=false; cert-manager
# when the cluster serves it.
check_webhook() {
  local f="${work}/scheduling.yaml"
  local pod='find("StatefulSet")["spec"]["template"]["spec"]'
  local args="${pod}['containers'][0]['args']"
  local mwc='find("MutatingWebhookConfiguration", "chamber")'
  expect_eq "webhook: entries" \
    '[["pods-opted-in.chamber.io", "Fail", "/mutate/pods", {"matchExpressions": [{"key": "chamber.io/queue", "operator": "Exists"}]}, {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["chamber-system", "kube-system"]}]}], ["pods-namespace-queue.chamber.io", "Fail", "/mutate/pods", {"matchExpressions": [{"key": "chamber.io/queue", "operator": "DoesNotExist"}]}, {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["chamber-system", "kube-system"]}, {"key": "chamber.io/queue", "operator": "Exists"}]}], ["pods.chamber.io", "Ignore", "/mutate/pods", {"matchExpressions": [{"key": "chamber.io/queue", "operator": "DoesNotExist"}]}, {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["chamber-system", "kube-system"]}, {"key": "chamber.io/queue", "operator": "DoesNotExist"}]}], ["workloads.chamber.io", "Fail", "/mutate/workloads", {"matchExpressions": [{"key": "chamber.io/queue", "operator": "Exists"}]}, {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["chamber-system", "kube-system"]}]}]]' \
    "$(query "${f}" "[[w['name'], w['failurePolicy'], w['clientConfig']['service']['path'], w['objectSelector'], w['namespaceSelector']] for w in ${mwc}['webhooks']]")"
  expect_eq "webhook: every entry" '[[["v1"], "None", 10, "Equivalent", "IfNeeded", "chamber-webhook", "chamber-system", 443]]' \
    "$(query "${f}" "[json.loads(x) for x in sorted({json.dumps([w['admissionReviewVersions'], w['sideEffects'], w['timeoutSeconds'], w['matchPolicy'], w['reinvocationPolicy'], w['clientConfig']['service']['name'], w['clientConfig']['service']['namespace'], w['clientConfig']['service']['port']]) for w in ${mwc}['webhooks']})]")"
  expect_eq "webhook: pod rules" '[{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]' \
    "$(query "${f}" "${mwc}['webhooks'][0]['rules']")"
  expect_eq "webhook: workload rules" '[["batch", "cronjobs", "jobs"], ["apps", "deployments", "replicasets", "statefulsets"], ["jobset.x-k8s.io", "leaderworkerset.x-k8s.io", "jobsets", "leaderworkersets"], ["kubeflow.org", "jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs"], ["ray.io", "rayclusters", "rayjobs"]]' \
    "$(query "${f}" "[r['apiGroups'] + sorted(r['resources']) for r in ${mwc}['webhooks'][3]['rules']]")"
  # The Service: every replica (not only the leader), on the webhook port.
  expect_eq "webhook: service" '[{"name": "webhook", "port": 443, "protocol": "TCP", "targetPort": "webhook"}]' \
    "$(query "${f}" 'find("Service", "chamber-webhook")["spec"]["ports"]')"
  expect_eq "webhook: service selects every replica" "True" \
    "$(query "${f}" 'str(find("Service", "chamber-webhook")["spec"]["selector"] == find("StatefulSet")["spec"]["selector"]["matchLabels"])')"
  expect_eq "webhook: chamberd args" '["--webhook-listen", "0.0.0.0:9443", "--webhook-tls-cert-file", "/etc/chamber-webhook/tls.crt", "--webhook-tls-key-file", "/etc/chamber-webhook/tls.key", "--webhook-exclude-namespace", "kube-system"]' \
    "$(query "${f}" "[a for i, a in enumerate(${args}) if a.startswith('--webhook') or ${args}[i - 1].startswith('--webhook')]")"
  expect_eq "webhook: port" '{"containerPort": 9443, "name": "webhook", "protocol": "TCP"}' \
    "$(query "${f}" "[p for p in ${pod}['containers'][0]['ports'] if p['name'] == 'webhook'][0]")"
  expect_eq "webhook: certificate volume" '[{"defaultMode": 288, "secretName": "chamber-webhook-tls"}, {"mountPath": "/etc/chamber-webhook", "name": "webhook-tls", "readOnly": true}]' \
    "$(query "${f}" "[[v['secret'] for v in ${pod}['volumes'] if v['name'] == 'webhook-tls'][0], [m for m in ${pod}['containers'][0]['volumeMounts'] if m['name'] == 'webhook-tls'][0]]")"
  # Helm's certificate: signed by the CA in the caBundle, for the Service's host name.
  local d="${work}/webhook-pki"
  mkdir -p "${d}"
  query "${f}" 'find("Secret", "chamber-webhook-tls")["data"]["tls.crt"]' | base64 -d >"${d}/tls.crt"
  query "${f}" 'find("Secret", "chamber-webhook-tls")["data"]["tls.key"]' | base64 -d >"${d}/tls.key"
  query "${f}" "${mwc}['webhooks'][0]['clientConfig']['caBundle']" | base64 -d >"${d}/ca.crt"
  expect_eq "webhook: one caBundle, the Secret's CA" "True" \
    "$(query "${f}" "str(len({w['clientConfig']['caBundle'] for w in ${mwc}['webhooks']}) == 1 and ${mwc}['webhooks'][0]['clientConfig']['caBundle'] == find('Secret', 'chamber-webhook-tls')['data']['ca.crt'])")"
  expect_contains "webhook: certificate for the Service host" "tls.crt: OK" \
    "$(openssl verify -CAfile "${d}/ca.crt" -verify_hostname chamber-webhook.chamber-system.svc "${d}/tls.crt" 2>&1)"
  expect_eq "webhook: the key is the certificate's" \
    "$(openssl x509 -in "${d}/tls.crt" -noout -pubkey 2>&1)" "$(openssl pkey -in "${d}/tls.key" -pubout 2>&1)"
  expect_eq "webhook: renewal time (now + validity - 30 days)" "True" \
    "$(query "${f}" "str(abs(int(find('Secret', 'chamber-webhook-tls')['metadata']['annotations']['chamber.io/renew-after']) - (__import__('time').time() + 3620 * 86400)) < 3600)")"

  # Off: in monitoring mode (the defaults) and with webhook.enabled=false.
  expect_eq "webhook: none in monitoring mode" "0" \
    "$(query "${work}/default.yaml" 'sum(d["kind"] == "MutatingWebhookConfiguration" or "webhook" in d["metadata"]["name"] for d in docs)')"
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --set webhook.enabled=false >"${work}/no-webhook.yaml" || fail "helm template (webhook.enabled=false)"
  expect_eq "webhook: none when disabled" '[0, false]' \
    "$(query "${work}/no-webhook.yaml" "[sum(d['kind'] == 'MutatingWebhookConfiguration' or 'webhook' in d['metadata']['name'] for d in docs), any(a.startswith('--webhook') for a in ${args})]")"
  expect_eq "webhook: no owner reads when disabled" "${sched_rules_no_webhook}" \
    "$(query "${work}/no-webhook.yaml" 'rules("ClusterRole", "chamber")')"
  # Narrowed to some namespaces (webhook.namespaceSelector), more exclusions, no workload entry.
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --set-json 'webhook.namespaceSelector={"matchLabels":{"chamber.io/managed":"true"}}' \
    --set-json 'webhook.excludeNamespaces=["kube-system","monitoring"]' \
    --set webhook.workloads.enabled=false >"${work}/narrow.yaml" || fail "helm template (webhook.namespaceSelector)"
  expect_eq "webhook: namespaceSelector on every entry" '[{"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["chamber-system", "kube-system", "monitoring"]}], "matchLabels": {"chamber.io/managed": "true"}}]' \
    "$(query "${work}/narrow.yaml" "[{'matchLabels': w['namespaceSelector']['matchLabels'], 'matchExpressions': w['namespaceSelector']['matchExpressions'][:1]} for w in find('MutatingWebhookConfiguration', 'chamber')['webhooks']][:1] if len({json.dumps(w['namespaceSelector']['matchLabels']) for w in find('MutatingWebhookConfiguration', 'chamber')['webhooks']}) == 1 else 'differ'")"
  expect_eq "webhook: entries without workloads" '["pods-opted-in.chamber.io", "pods-namespace-queue.chamber.io", "pods.chamber.io"]' \
    "$(query "${work}/narrow.yaml" "[w['name'] for w in find('MutatingWebhookConfiguration', 'chamber')['webhooks']]")"
  expect_eq "webhook: chamberd's exclusions" '["kube-system", "monitoring"]' \
    "$(query "${work}/narrow.yaml" "[${args}[i + 1] for i, a in enumerate(${args}) if a == '--webhook-exclude-namespace']")"

  # cert-manager, when the cluster serves it: the webhook's Certificate from the release's CA
  # (a CA Certificate from a self-signed Issuer, and a CA Issuer over it), or from issuerRef;
  # the caBundle injected; no Secret of Helm's.
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --api-versions cert-manager.io/v1 >"${work}/cert-manager.yaml" || fail "helm template (cert-manager)"
  expect_eq "webhook (cert-manager): objects" '[["Certificate/chamber-webhook", "Certificate/chamber-webhook-ca", "Issuer/chamber-webhook-ca", "Issuer/chamber-webhook-selfsigned"], 0, "chamber-system/chamber-webhook", false]' \
    "$(query "${work}/cert-manager.yaml" "[sorted(d['kind'] + '/' + d['metadata']['name'] for d in docs if d['apiVersion'] == 'cert-manager.io/v1'), sum(d['kind'] == 'Secret' for d in docs), ${mwc}['metadata']['annotations']['cert-manager.io/inject-ca-from'], any('caBundle' in w['clientConfig'] for w in ${mwc}['webhooks'])]")"
  expect_eq "webhook (cert-manager): certificate" '{"commonName": "chamber-webhook.chamber-system.svc", "dnsNames": ["chamber-webhook.chamber-system.svc", "chamber-webhook.chamber-system.svc.cluster.local"], "duration": "87600h", "issuerRef": {"kind": "Issuer", "name": "chamber-webhook-ca"}, "renewBefore": "720h", "secretName": "chamber-webhook-tls"}' \
    "$(query "${work}/cert-manager.yaml" 'find("Certificate", "chamber-webhook")["spec"]')"
  expect_eq "webhook (cert-manager): the release's CA" '[{"commonName": "chamber-webhook-ca", "duration": "87600h", "isCA": true, "issuerRef": {"kind": "Issuer", "name": "chamber-webhook-selfsigned"}, "secretName": "chamber-webhook-ca"}, {"ca": {"secretName": "chamber-webhook-ca"}}, {"selfSigned": {}}]' \
    "$(query "${work}/cert-manager.yaml" '[find("Certificate", "chamber-webhook-ca")["spec"], find("Issuer", "chamber-webhook-ca")["spec"], find("Issuer", "chamber-webhook-selfsigned")["spec"]]')"
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --api-versions cert-manager.io/v1 --set webhook.certificate.validityDays=90 \
    --set webhook.certificate.caValidityDays=365 >"${work}/cert-manager-days.yaml" ||
    fail "helm template (cert-manager, validity)"
  expect_eq "webhook (cert-manager): validityDays and caValidityDays" '["2160h", "8760h"]' \
    "$(query "${work}/cert-manager-days.yaml" '[find("Certificate", "chamber-webhook")["spec"]["duration"], find("Certificate", "chamber-webhook-ca")["spec"]["duration"]]')"
  local src out
  for src in helm cert-manager; do
    if out="$("${helm}" template chamber "${chart}" -f "${chart}/examples/scheduling.yaml" \
      --api-versions cert-manager.io/v1 --set webhook.certificate.source=${src} \
      --set webhook.certificate.validityDays=400 --set webhook.certificate.caValidityDays=365 2>&1)"; then
      fail "webhook (${src}): a certificate outliving its CA rendered"
    else
      expect_contains "webhook (${src}): a certificate outliving its CA" "webhook.certificate.validityDays (400) is longer than webhook.certificate.caValidityDays (365): the certificate would outlive its CA" "${out}"
    fi
  done
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --api-versions cert-manager.io/v1 --set webhook.certificate.issuerRef.name=corp-ca \
    --set webhook.certificate.issuerRef.kind=ClusterIssuer >"${work}/cert-manager-issuer.yaml" ||
    fail "helm template (cert-manager issuerRef)"
  expect_eq "webhook (cert-manager): issuerRef" '[{"kind": "ClusterIssuer", "name": "corp-ca"}, 0]' \
    "$(query "${work}/cert-manager-issuer.yaml" '[find("Certificate", "chamber-webhook")["spec"]["issuerRef"], sum(d["kind"] == "Issuer" for d in docs)]')"
  "${helm}" template chamber "${chart}" -n chamber-system -f "${chart}/examples/scheduling.yaml" \
    --api-versions cert-manager.io/v1 --set webhook.certificate.source=helm >"${work}/forced-helm.yaml" ||
    fail "helm template (certificate source helm)"
  expect_eq "webhook: source helm despite cert-manager" '[1, 0]' \
    "$(query "${work}/forced-helm.yaml" '[sum(d["kind"] == "Secret" for d in docs), sum(d["apiVersion"] == "cert-manager.io/v1" for d in docs)]')"
  if out="$("${helm}" template chamber "${chart}" -f "${chart}/examples/scheduling.yaml" \
    --set webhook.certificate.source=cert-manager 2>&1)"; then
    fail "webhook.certificate.source=cert-manager without cert-manager.io/v1 rendered"
  else
    expect_contains "webhook: cert-manager without the API" "webhook.certificate.source: cert-manager, but the cluster has no cert-manager.io/v1 API" "${out}"
  fi
}

# check_agent_push: where the agents push their reports. By default to this release's chamberd
# Service, a URL that names that Service, one of its ports, and through it chamberd's API port;
# agent.chamberdUrl wins; without chamberd and without agent.chamberdUrl, nowhere. A pushing
# agent mounts its token and chamberd accepts it as an agent.
# api.tls.secretName: chamberd serves HTTPS with the Secret's certificate, the standbys and the
# agents reach it over https:// trusting the Secret's CA, and the agents mount the CA alone.
check_api_tls() {
  local ds='find("DaemonSet")["spec"]["template"]["spec"]'
  local pod='find("StatefulSet")["spec"]["template"]["spec"]'
  local args="${pod}['containers'][0]['args']"
  local aargs="${ds}['containers'][0]['args']"
  expect_eq "no TLS by default" '[false, false, false]' \
    "$(query "${work}/default.yaml" "['--tls-cert-file' in ${args}, '--chamberd-ca-file' in ${aargs}, 'api-tls' in [v['name'] for v in ${pod}['volumes']]]")"
  "${helm}" template chamber "${chart}" -n chamber-system --set api.tls.secretName=chamber-api-tls \
    --set serviceMonitor.enabled=true --api-versions monitoring.coreos.com/v1 >"${work}/tls.yaml" ||
    fail "helm template (api.tls.secretName)"
  expect_eq "tls: chamberd flags" \
    '["/etc/chamber-tls/tls.crt", "/etc/chamber-tls/tls.key", "https://chamber.chamber-system.svc:80", "/etc/chamber-tls/ca.crt"]' \
    "$(query "${work}/tls.yaml" "[${args}[${args}.index(f) + 1] for f in ('--tls-cert-file', '--tls-key-file', '--history-follow-url', '--history-follow-ca-file')]")"
  expect_eq "tls: chamberd mounts the Secret" \
    '[{"mountPath": "/etc/chamber-tls", "name": "api-tls", "readOnly": true}, {"defaultMode": 288, "secretName": "chamber-api-tls"}]' \
    "$(query "${work}/tls.yaml" "[[m for m in ${pod}['containers'][0]['volumeMounts'] if m['name'] == 'api-tls'][0], [v['secret'] for v in ${pod}['volumes'] if v['name'] == 'api-tls'][0]]")"
  expect_eq "tls: agent URL and CA flag" \
    '["https://chamber.chamber-system.svc:80/api/v1/agent/reports", "/etc/chamber-ca/ca.crt"]' \
    "$(query "${work}/tls.yaml" "[${aargs}[${aargs}.index(f) + 1] for f in ('--chamberd-url', '--chamberd-ca-file')]")"
  expect_eq "tls: the agents mount the CA alone, never the key" \
    '[{"mountPath": "/etc/chamber-ca", "name": "chamberd-ca", "readOnly": true}, {"items": [{"key": "ca.crt", "path": "ca.crt"}], "secretName": "chamber-api-tls"}]' \
    "$(query "${work}/tls.yaml" "[[m for m in ${ds}['containers'][0]['volumeMounts'] if m['name'] == 'chamberd-ca'][0], [v['secret'] for v in ${ds}['volumes'] if v['name'] == 'chamberd-ca'][0]]")"
  expect_eq "tls: ServiceMonitor over https" \
    '{"ca": {"secret": {"key": "ca.crt", "name": "chamber-api-tls"}}, "serverName": "chamber.chamber-system.svc"}' \
    "$(query "${work}/tls.yaml" "(lambda e: e['tlsConfig'] if e['scheme'] == 'https' else 'scheme ' + e['scheme'])(find('ServiceMonitor', 'chamber')['spec']['endpoints'][0])")"
  # caKey empty (a certificate from a public CA): https, the system's trust store, no CA mount.
  "${helm}" template chamber "${chart}" -n chamber-system --set api.tls.secretName=chamber-api-tls \
    --set api.tls.caKey= >"${work}/tls-public.yaml" || fail "helm template (api.tls.caKey empty)"
  expect_eq "tls without a CA key" '[true, false, false, false]' \
    "$(query "${work}/tls-public.yaml" "[${aargs}[${aargs}.index('--chamberd-url') + 1].startswith('https://'), '--chamberd-ca-file' in ${aargs}, '--history-follow-ca-file' in ${args}, 'chamberd-ca' in [v['name'] for v in ${ds}['volumes']]]")"
}

check_agent_push() {
  local ds='find("DaemonSet")["spec"]["template"]["spec"]'
  local args='find("StatefulSet")["spec"]["template"]["spec"]["containers"][0]["args"]'
  local url="${ds}['containers'][0]['args'][${ds}['containers'][0]['args'].index('--chamberd-url') + 1]"
  expect_eq "agent token (pushing by default)" "True" \
    "$(query "${work}/default.yaml" "str(${ds}['automountServiceAccountToken'])")"
  expect_eq "chamberd --agent-user" "system:serviceaccount:chamber-system:chamber-agent" \
    "$(query "${work}/default.yaml" "${args}[${args}.index('--agent-user') + 1]")"
  # The URL's host is <Service>.<namespace>.svc, its port a port of that Service, whose target
  # is the container port chamberd's --listen serves the API on.
  expect_eq "default push URL: its Service, port, API port and path" \
    '["chamber", "chamber-system", "svc", 80, "/api/v1/agent/reports", "0.0.0.0:8080"]' \
    "$(query "${work}/default.yaml" "(lambda u: (lambda svc, port: [svc['metadata']['name'], svc['metadata']['namespace'], u.hostname.split('.')[2], port['port'], u.path, ${args}[${args}.index('--listen') + 1] if [c for c in find('StatefulSet')['spec']['template']['spec']['containers'][0]['ports'] if c['name'] == port['targetPort']][0]['containerPort'] == int(${args}[${args}.index('--listen') + 1].rsplit(':', 1)[1]) else 'target port mismatch'])(find('Service', u.hostname.split('.')[0]), [p for p in find('Service', u.hostname.split('.')[0])['spec']['ports'] if p['port'] == u.port][0]))(__import__('urllib.parse').parse.urlparse(${url}))")"

  # An explicit agent.chamberdUrl wins, with or without chamberd in the release.
  local other=http://chamber.gpu-ops.svc:80/api/v1/agent/reports
  "${helm}" template chamber "${chart}" -n chamber-system --set agent.chamberdUrl="${other}" \
    >"${work}/push.yaml" || fail "helm template (agent.chamberdUrl)"
  expect_eq "agent.chamberdUrl wins" "${other} True" \
    "$(query "${work}/push.yaml" "${url} + ' ' + str(${ds}['automountServiceAccountToken'])")"
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.enabled=false \
    --set agent.chamberdUrl="${other}" >"${work}/agents-elsewhere.yaml" ||
    fail "helm template (chamberd.enabled=false, agent.chamberdUrl)"
  expect_eq "agent.chamberdUrl without chamberd" "${other} True" \
    "$(query "${work}/agents-elsewhere.yaml" "${url} + ' ' + str(${ds}['automountServiceAccountToken'])")"

  # No chamberd: agents only, pushing nowhere, with no token.
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.enabled=false \
    >"${work}/agents-only.yaml" || fail "helm template (chamberd.enabled=false)"
  expect_eq "kinds without chamberd" '["DaemonSet", "Service", "ServiceAccount"]' \
    "$(query "${work}/agents-only.yaml" 'sorted(d["kind"] for d in docs)')"
  expect_eq "agent without chamberd: no URL, no token" '[false, false]' \
    "$(query "${work}/agents-only.yaml" "['--chamberd-url' in ${ds}['containers'][0]['args'], ${ds}['automountServiceAccountToken']]")"
  local out
  out="$("${helm}" install chamber "${chart}" -n chamber-system --dry-run=client --set chamberd.enabled=false 2>&1)" ||
    fail "helm install --dry-run (chamberd.enabled=false): ${out}"
  expect_contains "NOTES without chamberd" "chamberd is not installed (chamberd.enabled=false)" "${out}"
  expect_contains "NOTES without chamberd: no push" "The agents push no reports" "${out}"
  expect_not_contains "NOTES without chamberd: no dashboard" "port-forward" "${out}"
}

# check_history_volumes: the history's volume per replica (docs/install.md, "History").
check_history_volumes() {
  local sts='find("StatefulSet")["spec"]' out
  local volumes="[v for v in ${sts}['template']['spec']['volumes'] if v['name'] == 'data']"
  local claims="${sts}.get('volumeClaimTemplates', [])"
  # auto, and helm template has no cluster to ask: an emptyDir.
  expect_eq "history: auto without a cluster" '[[{"emptyDir": {}, "name": "data"}], []]' \
    "$(query "${work}/default.yaml" "[${volumes}, ${claims}]")"
  # docs/benchmarks.md ("Under 500 MiB"): about twice what chamberd holds at 100,000 pods.
  expect_eq "chamberd's memory" '{"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "512Mi"}}' \
    "$(query "${work}/default.yaml" "${sts}['template']['spec']['containers'][0]['resources']")"
  expect_eq "history mount" '[{"mountPath": "/var/lib/chamber", "name": "data"}]' \
    "$(query "${work}/default.yaml" "[m for m in ${sts}['template']['spec']['containers'][0]['volumeMounts'] if m['name'] == 'data']")"
  out="$("${helm}" install chamber "${chart}" -n chamber-system --dry-run=client 2>&1)" ||
    fail "helm install --dry-run: ${out}"
  expect_contains "NOTES: emptyDir warning" "WARNING: the utilization history is kept in emptyDirs (the cluster has no default StorageClass)" "${out}"
  expect_contains "NOTES: default push" "The agents push their reports to http://chamber.chamber-system.svc:80/api/v1/agent/reports" "${out}"
  out="$("${helm}" install chamber "${chart}" -n chamber-system --dry-run=client \
    --set chamberd.persistence.storageClassName=fast-ssd 2>&1)" || fail "helm install --dry-run (class): ${out}"
  expect_contains "NOTES: emptyDir warning (a named class)" "kept in emptyDirs (the cluster has no StorageClass fast-ssd)" "${out}"
  # true: a claim per replica, of the default StorageClass unless one is named.
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.persistence.enabled=true \
    >"${work}/pvc.yaml" || fail "helm template (persistence)"
  expect_eq "history: a claim per replica" '[[], [{"metadata": {"labels": {"app.kubernetes.io/component": "chamberd", "app.kubernetes.io/instance": "chamber", "app.kubernetes.io/name": "chamber"}, "name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}]]' \
    "$(query "${work}/pvc.yaml" "[${volumes}, ${claims}]")"
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.persistence.enabled=true \
    --set chamberd.persistence.storageClassName=fast-ssd --set chamberd.persistence.size=20Gi \
    >"${work}/pvc-class.yaml" || fail "helm template (persistence, class)"
  expect_eq "history: class and size" '{"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}, "storageClassName": "fast-ssd"}' \
    "$(query "${work}/pvc-class.yaml" "${claims}[0]['spec']")"
  out="$("${helm}" install chamber "${chart}" -n chamber-system --dry-run=client --set chamberd.persistence.enabled=true 2>&1)" ||
    fail "helm install --dry-run (persistence): ${out}"
  expect_contains "NOTES: claims" "PersistentVolumeClaims
data-chamber-<n>, 2Gi, storage class the cluster's default" "${out}"
  expect_not_contains "NOTES: no warning with claims" "WARNING" "${out}"
  # No history: no volume, no claim, no copying.
  "${helm}" template chamber "${chart}" -n chamber-system --set chamberd.history=false \
    --set chamberd.persistence.enabled=true >"${work}/no-history.yaml" || fail "helm template (no history)"
  local args="${sts}['template']['spec']['containers'][0]['args']"
  expect_eq "no history: no volume, claim or history flags" '[[], [], false, false, false]' \
    "$(query "${work}/no-history.yaml" "[${volumes}, ${claims}, '--data-dir' in ${args}, '--history-follow-url' in ${args}, '--replica-user' in ${args}]")"
}

# check_grafana_dashboard <manifests.yaml>: the dashboard ConfigMap holds valid dashboard JSON,
# and every metric a panel queries is one chamberd (src/daemon/api_json.cc) or the agent
# (src/agent/report.cc) exports: a renamed metric fails here.
check_grafana_dashboard() {
  local manifests="$1" out
  expect_eq "dashboard label" "1" \
    "$(query "${manifests}" 'find("ConfigMap", "chamber-grafana-dashboard")["metadata"]["labels"]["grafana_dashboard"]')"
  out="$(query "${manifests}" 'json.loads(find("ConfigMap", "chamber-grafana-dashboard")["data"]["chamber-fleet.json"])["uid"]')"
  expect_eq "dashboard JSON" "chamber-fleet" "${out}"
  local metrics exported missing=() m
  metrics="$(query "${manifests}" '" ".join(sorted({m for p in json.loads(find("ConfigMap", "chamber-grafana-dashboard")["data"]["chamber-fleet.json"])["panels"] for t in p.get("targets", []) for m in __import__("re").findall(r"\bchamber_[a-z0-9_]+", t["expr"])}))')"
  # Metric families are named by string literals in those two files.
  exported="$(grep -ohE '"chamber_[a-z0-9_]+"' "${root}/src/daemon/api_json.cc" "${root}/src/agent/report.cc" |
    tr -d '"' | sort -u)"
  for m in ${metrics}; do
    grep -qx "${m}" <<<"${exported}" || missing+=("${m}")
  done
  expect_eq "dashboard metrics not exported by chamberd or the agent" "" "${missing[*]}"
  # Sanity of the check itself: the dashboard covers both exporters.
  expect_contains "dashboard queries chamberd" "chamber_gpus_capacity" "${metrics}"
  expect_contains "dashboard queries the agent" "chamber_gpu_utilization_ratio" "${metrics}"
  local count
  count="$(wc -w <<<"${metrics}")"
  ((count >= 20)) && pass || fail "dashboard queries only ${count} metrics"
}

# Scheduling without the admission webhook: no reads of owners and namespaces.
sched_rules_no_webhook="create events create pods create pods/binding create pods/eviction create tokenreviews.authentication.k8s.io delete pods get nodes get pods list jaxjobs.kubeflow.org list jobs.batch list jobsets.jobset.x-k8s.io list leaderworkersets.leaderworkerset.x-k8s.io list mpijobs.kubeflow.org list mxjobs.kubeflow.org list namespaces list nodes list paddlejobs.kubeflow.org list podgroups.scheduling.k8s.io list pods list priorityclasses.scheduling.k8s.io list pytorchjobs.kubeflow.org list queues.chamber.io list rayclusters.ray.io list rayjobs.ray.io list tfjobs.kubeflow.org list trainjobs.trainer.kubeflow.org list workloads.scheduling.k8s.io list xgboostjobs.kubeflow.org patch jaxjobs.kubeflow.org patch jobs.batch patch jobsets.jobset.x-k8s.io patch mpijobs.kubeflow.org patch mxjobs.kubeflow.org patch nodes patch nodes/status patch paddlejobs.kubeflow.org patch podgroups/status.scheduling.k8s.io patch pods/status patch pytorchjobs.kubeflow.org patch queues/status.chamber.io patch rayclusters.ray.io patch rayjobs.ray.io patch tfjobs.kubeflow.org patch trainjobs.trainer.kubeflow.org patch xgboostjobs.kubeflow.org watch jaxjobs.kubeflow.org watch jobs.batch watch jobsets.jobset.x-k8s.io watch leaderworkersets.leaderworkerset.x-k8s.io watch mpijobs.kubeflow.org watch mxjobs.kubeflow.org watch namespaces watch nodes watch paddlejobs.kubeflow.org watch podgroups.scheduling.k8s.io watch pods watch priorityclasses.scheduling.k8s.io watch pytorchjobs.kubeflow.org watch queues.chamber.io watch rayclusters.ray.io watch rayjobs.ray.io watch tfjobs.kubeflow.org watch trainjobs.trainer.kubeflow.org watch workloads.scheduling.k8s.io watch xgboostjobs.kubeflow.org"
# can <yes|no> <service account> <namespace or -> <kubectl auth can-i arguments...>
can() {
  local want="$1" sa="$2" ns="$3" got
  shift 3
  local nsarg=()
  [[ "${ns}" != - ]] && nsarg=(-n "${ns}")
  # stdout holds the answer; stderr warnings (a cluster-scoped resource) and errors.
  got="$("${kubectl}" auth can-i "$@" "${nsarg[@]}" \
    --as="system:serviceaccount:${release_ns}:${sa}" 2>"${work}/can-i.err" || true)"
  [[ -n "${got}" ]] || got="$(cat "${work}/can-i.err")"
  expect_eq "can-i ${sa}: $* ${nsarg[*]}" "${want}" "${got}"
}

# sa_kubeconfig <service account> <namespace>: a kubeconfig for the test apiserver holding only
# a 10-minute token of that service account, on stdout.
sa_kubeconfig() {
  local token ca
  token="$("${kubectl}" create token "$1" -n "$2" --duration 10m)" || return 1
  ca="$("${kubectl}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  cat <<EOF
apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "${CHAMBER_APISERVER_URL}", certificate-authority-data: "${ca}"}}]
users: [{name: chamberd, user: {token: "${token}"}}]
contexts: [{name: test, context: {cluster: test, user: chamberd, namespace: "$2"}}]
current-context: test
EOF
}

# webhook_pod <name> <labels as YAML flow entries>: creates a bare pod in the webhook's test
# namespace (check_webhook_installed); kubectl's output, and its status.
webhook_pod() {
  "${kubectl}" create -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: ${release_ns}-wh, labels: {$2}}
spec: {containers: [{name: main, image: trainer}]}
EOF
}

# check_webhook_installed: the installed webhook on the real API server. Its CA is the Secret's;
# with no replica to answer (no kubelet runs chamberd here), a labelled pod in a namespace it
# covers is refused and an unlabelled one admitted unchanged; an upgrade keeps the certificate.
check_webhook_installed() {
  local out secret_ca bundle crt
  secret_ca="$("${kubectl}" get secret "${release}-webhook-tls" -n "${release_ns}" -o jsonpath='{.data.ca\.crt}')"
  bundle="$("${kubectl}" get mutatingwebhookconfiguration "${release}" -o jsonpath='{.webhooks[*].clientConfig.caBundle}')"
  expect_eq "webhook: caBundle of every entry is the Secret's CA" \
    "${secret_ca} ${secret_ca} ${secret_ca} ${secret_ca}" "${bundle}"
  "${kubectl}" create namespace "${release_ns}-wh" >/dev/null
  "${kubectl}" label namespace "${release_ns}-wh" "chamber-helm-test/webhook=${release_ns}" >/dev/null
  cleanup_steps+=("'${kubectl}' delete namespace '${release_ns}-wh' --wait=false >/dev/null 2>&1")
  out="$(webhook_pod labelled "chamber.io/queue: ${release}" 2>&1)" &&
    fail "webhook: a labelled pod was admitted with no replica to answer: ${out}"
  expect_contains "webhook: labelled pod refused by the fail-closed entry" \
    'failed calling webhook "pods-opted-in.chamber.io"' "${out}"
  out="$(webhook_pod plain "app: x" 2>&1)" || fail "webhook: an unlabelled pod was refused: ${out}"
  expect_eq "webhook: unlabelled pod admitted unchanged" "default-scheduler" \
    "$("${kubectl}" get pod plain -n "${release_ns}-wh" -o jsonpath='{.spec.schedulerName}' 2>&1)"
  # An upgrade keeps Helm's CA and certificate (read back through lookup).
  crt="$("${kubectl}" get secret "${release}-webhook-tls" -n "${release_ns}" -o jsonpath='{.data.tls\.crt}')"
  out="$("${helm}" upgrade "${release}" "${chart}" -n "${release_ns}" --reuse-values 2>&1)" ||
    fail "helm upgrade (webhook certificate): ${out}"
  expect_eq "webhook: certificate kept across upgrades" "${crt}" \
    "$("${kubectl}" get secret "${release}-webhook-tls" -n "${release_ns}" -o jsonpath='{.data.tls\.crt}')"
  expect_eq "webhook: caBundle kept across upgrades" "${secret_ca}" \
    "$("${kubectl}" get mutatingwebhookconfiguration "${release}" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')"
}

# secret_files <secret> <namespace> <dir>: each key of the Secret as a file in <dir>, each
# replaced whole (written aside, then renamed), as the kubelet swaps a Secret volume's files.
secret_files() {
  local k
  for k in $("${kubectl}" get secret "$1" -n "$2" -o go-template='{{range $k, $v := .data}}{{$k}} {{end}}'); do
    "${kubectl}" get secret "$1" -n "$2" -o jsonpath="{.data.${k//./\\.}}" | base64 -d >"$3/.${k}.new"
    mv -f "$3/.${k}.new" "$3/${k}"
  done
}

# review_labelled_pod <host> <port> <CA bundle file>: chamberd's answer to an AdmissionReview of
# a labelled pod, over HTTPS to 127.0.0.1:<port> as the API server reaches <host> (the
# certificate must name <host> and be trusted through the bundle), as [allowed, uid, patch];
# review_patched is the answer that sets the scheduler.
review_patched='[true, "u1", [{"op": "add", "path": "/spec/schedulerName", "value": "chamber"}]]'
review_labelled_pod() {
  local review answer
  review='{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"ml","operation":"CREATE","object":{"metadata":{"name":"p","labels":{"chamber.io/queue":"q"}},"spec":{"containers":[{"name":"main","image":"x"}]}}}}'
  answer="$(curl -sS --cacert "$3" --resolve "$1:$2:127.0.0.1" -H 'Content-Type: application/json' \
    -d "${review}" "https://$1:$2/mutate/pods" 2>&1)"
  python3 -c 'import base64, json, sys; r = json.loads(sys.argv[1])["response"]; print(json.dumps([r["allowed"], r["uid"], json.loads(base64.b64decode(r["patch"]))]))' "${answer}" 2>/dev/null ||
    printf '%s\n' "${answer}"
}

# installed_chamberd_args <release> <namespace> <dir> <port> <health port> <webhook port>: sets
# `args` to the installed StatefulSet's chamberd arguments with local paths and loopback ports:
# the configuration from the release's ConfigMap in <dir>/chamber.yaml, the history in
# <dir>/data, the webhook's certificate files in <dir>/webhook/, and the Service's address (from
# which a standby copies the history) this chamberd's own.
installed_chamberd_args() {
  local rel="$1" ns="$2" dir="$3" port="$4" hport="$5" wport="$6"
  "${kubectl}" get configmap "${rel}" -n "${ns}" -o jsonpath='{.data.chamber\.yaml}' >"${dir}/chamber.yaml"
  mapfile -t args < <("${kubectl}" get statefulset "${rel}" -n "${ns}" \
    -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}' |
    sed -e "s|^0.0.0.0:8080$|127.0.0.1:${port}|" -e "s|^0.0.0.0:8081$|127.0.0.1:${hport}|" \
      -e "s|^/etc/chamber/chamber.yaml$|${dir}/chamber.yaml|" \
      -e "s|^0.0.0.0:9443$|127.0.0.1:${wport}|" -e "s|^/etc/chamber-webhook/|${dir}/webhook/|" \
      -e "s|^/var/lib/chamber$|${dir}/data|" \
      -e "s|^http://${rel}.${ns}.svc:80$|http://127.0.0.1:${port}|")
}

# run_chamberd <scheduling|monitoring>: the chamberd binary (CHAMBER_CHAMBERD) with the installed
# StatefulSet's arguments and its service account's token, against the test apiserver. It must
# take the Lease, list and watch everything, answer a dashboard token through TokenReview, and
# (scheduling) bind a Job's pod to a fake GPU node (CHAMBER_KUBESIM) or (monitoring) leave a new
# one alone, with no request refused.
run_chamberd() {
  local what="$1"
  if [[ -z "${CHAMBER_CHAMBERD:-}" || ! -x "${CHAMBER_CHAMBERD}" || -z "${CHAMBER_KUBESIM:-}" ||
    ! -x "${CHAMBER_KUBESIM}" ]]; then
    printf 'chart_test: CHAMBER_CHAMBERD or CHAMBER_KUBESIM not built: chamberd is not run (%s)\n' "${what}"
    return 0
  fi
  local dir="${work}/chamberd-${what}" sa="${release}" node="${release}-gpu-0" job=train-${what}
  mkdir -p "${dir}/data"

  # A kubeconfig holding only the service account's token.
  sa_kubeconfig "${sa}" "${release_ns}" >"${dir}/kubeconfig" || fail "token for ${sa}"

  # The installed StatefulSet's arguments, with local paths and free loopback ports.
  local port hport wport args=()
  port="$(free_port)"
  hport="$(free_port)"
  wport="$(free_port)"
  # The webhook's certificate files, from the Secret the volume would mount.
  mkdir -p "${dir}/webhook"
  if "${kubectl}" get secret "${release}-webhook-tls" -n "${release_ns}" >/dev/null 2>&1; then
    secret_files "${release}-webhook-tls" "${release_ns}" "${dir}/webhook"
  fi
  installed_chamberd_args "${release}" "${release_ns}" "${dir}" "${port}" "${hport}" "${wport}"
  expect_contains "chamberd args (${what})" "--leader-elect --lease-namespace ${release_ns}" "${args[*]}"

  if [[ "${what}" == scheduling ]]; then
    "${CHAMBER_KUBESIM}" --kubeconfig "${KUBECONFIG}" nodes create --count 1 --gpus 8 \
      --prefix "${release}-gpu" >"${dir}/kubesim.log" 2>&1 || fail "chamber-kubesim nodes create: $(cat "${dir}/kubesim.log")"
    cleanup_steps+=("'${kubectl}' delete node '${node}' --wait=false >/dev/null 2>&1")
    cleanup_steps+=("'${kubectl}' delete queue.chamber.io '${release}' --wait=false >/dev/null 2>&1")
    "${kubectl}" apply -f - >/dev/null <<EOF || fail "queue: apply"
apiVersion: chamber.io/v1alpha1
kind: Queue
metadata: {name: ${release}}
spec: {resources: {gpu: {quota: 8}}}
EOF
  fi
  "${kubectl}" apply -f - >/dev/null <<EOF || fail "job ${job}: apply"
apiVersion: batch/v1
kind: Job
metadata: {name: ${job}, namespace: ${release_ns}}
spec:
  template:
    metadata: {labels: {chamber.io/queue: ${release}}}
    spec:
      schedulerName: chamber
      restartPolicy: Never
      containers:
        - name: main
          image: trainer
          resources: {limits: {nvidia.com/gpu: "2"}, requests: {nvidia.com/gpu: "2"}}
EOF

  # The pod the kubelet would run chamberd in (none runs here): chamberd labels it the leader.
  local self="${release}-${what}-0" selector
  "${kubectl}" apply -f - >/dev/null <<EOF || fail "pod ${self}: apply"
apiVersion: v1
kind: Pod
metadata:
  name: ${self}
  namespace: ${release_ns}
  labels: {app.kubernetes.io/name: chamber, app.kubernetes.io/instance: ${release}, app.kubernetes.io/component: chamberd}
spec:
  schedulerName: nobody
  containers: [{name: chamberd, image: chamberd}]
EOF
  selector="$("${kubectl}" get service "${release}" -n "${release_ns}" \
    -o go-template='{{range $k, $v := .spec.selector}}{{$k}}={{$v}},{{end}}')"

  POD_NAMESPACE="${release_ns}" POD_NAME="${self}" "${CHAMBER_CHAMBERD}" \
    --kubeconfig "${dir}/kubeconfig" "${args[@]}" --identity "test-${what}" >"${dir}/log" 2>&1 &
  local pid=$! started
  started="$(date +%s.%N)"
  local url="http://127.0.0.1:${port}" i healthy=0
  for ((i = 0; i < 300; i++)); do
    if [[ "$(curl -s -m 1 "${url}/healthz" 2>/dev/null)" == ok* ]]; then
      healthy=1
      break
    fi
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  expect_eq "chamberd /healthz (${what})" "1" "${healthy}"
  printf 'chart_test: chamberd (%s) served /healthz %.1f s after start\n' "${what}" \
    "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "${started}" "$(date +%s.%N)")"
  expect_eq "lease holder (${what})" "test-${what}" "$("${kubectl}" get lease chamber-scheduler \
    -n "${release_ns}" -o jsonpath='{.spec.holderIdentity}' 2>&1)"
  # The probes' port (--health-listen): live, and ready once it leads and serves the API.
  expect_eq "chamberd health port /healthz (${what})" "200 ok" \
    "$(curl -s -w '%{http_code} ' -o "${dir}/healthz" "http://127.0.0.1:${hport}/healthz")$(cat "${dir}/healthz")"
  expect_eq "chamberd health port /readyz (${what})" "200 ok: leader" \
    "$(curl -s -w '%{http_code} ' -o "${dir}/readyz" "http://127.0.0.1:${hport}/readyz")$(cat "${dir}/readyz")"
  # The leader labels its pod, and the Service's selector picks exactly that pod.
  local selected=""
  for ((i = 0; i < 50; i++)); do
    selected="$("${kubectl}" get pods -n "${release_ns}" -l "${selector%,}" -o name 2>&1)"
    [[ "${selected}" == "pod/${self}" ]] && break
    sleep 0.1
  done
  expect_eq "pods the Service selects while ${self} leads (${what})" "pod/${self}" "${selected}"

  # The webhook (scheduling): HTTPS with Helm's certificate for the Service's host name, trusted
  # through the CA in the caBundle; a labelled pod gets the scheduler.
  if [[ "${what}" == scheduling ]]; then
    expect_eq "webhook over the chart's certificate (${what})" "${review_patched}" \
      "$(review_labelled_pod "${release}-webhook.${release_ns}.svc" "${wport}" "${dir}/webhook/ca.crt")"
  else
    expect_not_contains "no webhook in monitoring mode" "--webhook" "${args[*]}"
  fi

  # A dashboard token is accepted through TokenReview; none is refused.
  local dash_token
  dash_token="$("${kubectl}" create token "${release}-dashboard" -n "${release_ns}" --duration 10m)"
  expect_eq "GET /api/v1/fleet with the dashboard token (${what})" "200" \
    "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${dash_token}" "${url}/api/v1/fleet")"
  expect_eq "GET /api/v1/fleet without a token (${what})" "401" \
    "$(curl -s -o /dev/null -w '%{http_code}' "${url}/api/v1/fleet")"

  local pod_node="" waits=100
  [[ "${what}" == monitoring ]] && waits=30  # a few cycles
  for ((i = 0; i < waits; i++)); do
    pod_node="$("${kubectl}" get pods -n "${release_ns}" -l "job-name=${job}" \
      -o jsonpath='{.items[*].spec.nodeName}' 2>/dev/null || true)"
    [[ -n "${pod_node}" ]] && break
    sleep 0.1
  done
  if [[ "${what}" == scheduling ]]; then
    expect_eq "the Job's pod bound by chamberd" "${node}" "${pod_node}"
    check_leader_fence_installed "${node}" "${job}"
  else
    expect_eq "monitoring: the Job's pod is left alone" "" "${pod_node}"
    expect_eq "monitoring: the pod exists" "1" "$("${kubectl}" get pods -n "${release_ns}" \
      -l "job-name=${job}" -o name | wc -l)"
  fi

  kill -TERM "${pid}"
  local rc=0
  wait "${pid}" || rc=$?
  expect_eq "chamberd exit status after SIGTERM (${what})" "0" "${rc}"
  expect_eq "leader label after SIGTERM (${what})" "false" "$("${kubectl}" get pod "${self}" \
    -n "${release_ns}" -o jsonpath='{.metadata.labels.chamber\.io/leader}')"
  expect_eq "requests refused by RBAC (${what})" "" "$(grep -iE 'forbidden|\b403\b' "${dir}/log" || true)"
  if ((failures > 0)); then
    printf -- '---- chamberd log (%s) ----\n' "${what}" >&2
    tail -n 40 "${dir}/log" >&2
  fi
}

# check_leader_fence_installed <node> <job>: the installed leader fence on the real API server
# (docs/reliability.md#fencing-a-deposed-leader). chamberd's bind of the Job's pod carried the
# release's Lease and its term there, and passed; a binding of a stale term is refused with the
# policy's message.
check_leader_fence_installed() {
  local node="$1" job="$2" out i
  expect_eq "leader fence: the bound pod's lease and term" \
    "${release_ns}/chamber-scheduler test-scheduling/0" \
    "$("${kubectl}" get pods -n "${release_ns}" -l "job-name=${job}" \
      -o go-template='{{range .items}}{{index .metadata.annotations "chamber.io/leader-lease"}} {{index .metadata.annotations "chamber.io/leader-term"}}{{end}}' 2>&1)"
  "${kubectl}" apply -f - >/dev/null <<EOF || fail "pod fence-probe: apply"
apiVersion: v1
kind: Pod
metadata: {name: fence-probe, namespace: ${release_ns}}
spec: {schedulerName: nobody, containers: [{name: main, image: trainer}]}
EOF
  printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"fence-probe","annotations":{"chamber.io/leader-lease":"%s/chamber-scheduler","chamber.io/leader-term":"deposed/0"}},"target":{"kind":"Node","name":"%s"}}' \
    "${release_ns}" "${node}" >"${work}/stale-binding.json"
  for ((i = 0; i < 20; i++)); do
    out="$("${kubectl}" create --raw "/api/v1/namespaces/${release_ns}/pods/fence-probe/binding" \
      -f "${work}/stale-binding.json" 2>&1)" && break
    [[ "${out}" == *"is forbidden"* ]] && break
    sleep 0.5
  done
  expect_contains "leader fence: a stale term's binding refused" \
    "chamber.io/leader-term deposed/0 is not the term of lease ${release_ns}/chamber-scheduler now (test-scheduling/0): a binding of a deposed leader" \
    "${out}"
  expect_eq "leader fence: the probe stays unbound" "" \
    "$("${kubectl}" get pod fence-probe -n "${release_ns}" -o jsonpath='{.spec.nodeName}' 2>&1)"
}

run_apply() {
  [[ -x "${kubectl}" ]] || die "kubectl not found"
  local out
  release="chamber-t$$"
  release_ns="chamber-helm-test-$$"
  local sa="${release}" agent="${release}-agent" dash="${release}-dashboard"

  local crd_existed=0
  "${kubectl}" get crd queues.chamber.io >/dev/null 2>&1 && crd_existed=1
  "${kubectl}" create namespace "${release_ns}" >/dev/null
  cleanup_steps+=("'${kubectl}' delete namespace '${release_ns}' --wait=false >/dev/null 2>&1")
  cleanup_steps+=("'${kubectl}' delete clusterrole,clusterrolebinding,mutatingwebhookconfiguration -l app.kubernetes.io/instance=${release} >/dev/null 2>&1")
  ((crd_existed)) || cleanup_steps+=("'${kubectl}' delete crd queues.chamber.io --wait=false >/dev/null 2>&1")

  # Server-side dry run of everything the chart renders, CRD included.
  "${helm}" template "${release}" "${chart}" -n "${release_ns}" --include-crds \
    -f "${chart}/examples/scheduling.yaml" >"${work}/rendered.yaml"
  out="$("${kubectl}" apply --server-side --force-conflicts --dry-run=server -f "${work}/rendered.yaml" 2>&1)" ||
    fail "server-side dry run: ${out}"
  local object
  for object in customresourcedefinition.apiextensions.k8s.io/queues.chamber.io \
    "serviceaccount/${release}" "serviceaccount/${agent}" "serviceaccount/${dash}" \
    "configmap/${release}" "clusterrole.rbac.authorization.k8s.io/${release}" \
    "clusterrolebinding.rbac.authorization.k8s.io/${release}" \
    "role.rbac.authorization.k8s.io/${release}-leader-election" \
    "rolebinding.rbac.authorization.k8s.io/${release}-leader-election" "service/${release}" \
    "daemonset.apps/${agent}" "service/${agent}" "statefulset.apps/${release}" \
    "service/${release}-replicas" \
    "poddisruptionbudget.policy/${release}"; do
    expect_contains "dry run: ${object}" "${object} serverside-applied (server dry run)" "${out}"
  done
  expect_eq "dry run created nothing" "" \
    "$("${kubectl}" get statefulset,clusterrole -n "${release_ns}" -l "app.kubernetes.io/instance=${release}" -o name 2>&1)"

  # The real install, in scheduling mode. The admission webhook is limited to one namespace of
  # this test's (no chamberd pod runs here to answer it, and other tests share the cluster).
  local webhook_selector="{\"matchLabels\":{\"chamber-helm-test/webhook\":\"${release_ns}\"}}"
  out="$("${helm}" install "${release}" "${chart}" -n "${release_ns}" -f "${chart}/examples/scheduling.yaml" \
    --set-json "webhook.namespaceSelector=${webhook_selector}" 2>&1)" ||
    fail "helm install: ${out}"
  expect_contains "helm install: status" "STATUS: deployed" "${out}"
  expect_contains "helm install: NOTES port-forward" \
    "kubectl -n ${release_ns} port-forward service/${release} 8080:80" "${out}"
  expect_contains "helm install: NOTES token" "kubectl -n ${release_ns} create token ${dash}" "${out}"
  # No default StorageClass here: the history lives in emptyDirs, and NOTES says so.
  expect_contains "helm install: NOTES history" "WARNING: the utilization history is kept in emptyDirs (the cluster has no default StorageClass)" "${out}"
  expect_eq "no volume claims without a default StorageClass" "" \
    "$("${kubectl}" get statefulset "${release}" -n "${release_ns}" -o jsonpath='{.spec.volumeClaimTemplates}')"
  expect_eq "statefulset" "2 chamber" "$("${kubectl}" get statefulset "${release}" -n "${release_ns}" \
    -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].args[12]}')"
  expect_eq "crd established" "True" "$("${kubectl}" get crd queues.chamber.io \
    -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')"

  # chamberd: every call it makes is allowed.
  local r
  for r in nodes pods namespaces jobs.batch priorityclasses.scheduling.k8s.io queues.chamber.io; do
    can yes "${sa}" - list "${r}" --all-namespaces
    can yes "${sa}" - watch "${r}" --all-namespaces
  done
  can yes "${sa}" default create pods --subresource=binding
  can yes "${sa}" default create pods --subresource=eviction
  can yes "${sa}" default patch pods --subresource=status
  can yes "${sa}" default create events
  can yes "${sa}" default patch jobs.batch
  can yes "${sa}" default delete pods
  can yes "${sa}" - patch nodes
  can yes "${sa}" - get nodes
  can yes "${sa}" - patch nodes --subresource=status
  can yes "${sa}" - patch queues.chamber.io --subresource=status
  can yes "${sa}" - create tokenreviews.authentication.k8s.io
  can yes "${sa}" "${release_ns}" create leases.coordination.k8s.io
  can yes "${sa}" "${release_ns}" get leases.coordination.k8s.io/chamber-scheduler
  can yes "${sa}" "${release_ns}" update leases.coordination.k8s.io/chamber-scheduler
  can yes "${sa}" "${release_ns}" patch pods
  # A gang of bare pods rolled back: its bound pods are read back and created again.
  can yes "${sa}" default get pods
  can yes "${sa}" default create pods
  # ... and nothing broader.
  can no "${sa}" - delete nodes
  can no "${sa}" - update nodes
  can no "${sa}" - update nodes --subresource=status
  can no "${sa}" default patch pods
  can no "${sa}" default get secrets
  can no "${sa}" - list secrets --all-namespaces
  can no "${sa}" default create pods --subresource=exec
  can no "${sa}" default update jobs.batch
  can no "${sa}" default delete jobs.batch
  can no "${sa}" - patch queues.chamber.io
  can no "${sa}" - delete queues.chamber.io
  can no "${sa}" "${release_ns}" update pods
  can no "${sa}" "${release_ns}" get leases.coordination.k8s.io/other-lease
  can no "${sa}" "${release_ns}" delete leases.coordination.k8s.io/chamber-scheduler
  can no "${sa}" kube-system create leases.coordination.k8s.io
  can no "${sa}" kube-system update leases.coordination.k8s.io/chamber-scheduler
  can no "${sa}" - create clusterrolebindings.rbac.authorization.k8s.io
  # The agent and the dashboard account hold nothing.
  can no "${agent}" - get nodes
  can no "${agent}" - patch nodes
  can no "${agent}" default list pods
  can no "${dash}" default list pods
  can no "${dash}" - create tokenreviews.authentication.k8s.io

  # The webhook's reads: owners of the kinds that own pods, and namespaces; nothing else.
  can yes "${sa}" - get namespaces
  can yes "${sa}" default get replicasets.apps
  can yes "${sa}" default get deployments.apps
  can yes "${sa}" default get jobs.batch
  can yes "${sa}" default get cronjobs.batch
  can no "${sa}" default get configmaps
  can no "${sa}" default list deployments.apps
  check_webhook_installed

  run_chamberd scheduling

  # helm upgrade to monitoring mode: the scheduling rules are gone, the rest stays.
  out="$("${helm}" upgrade "${release}" "${chart}" -n "${release_ns}" --set mode=monitoring 2>&1)" ||
    fail "helm upgrade: ${out}"
  expect_contains "helm upgrade: revision" "REVISION: 3" "${out}"
  expect_contains "helm upgrade: NOTES" "chamberd schedules nothing in this mode" "${out}"
  expect_eq "scheduler name (monitoring)" "chamber-disabled" "$("${kubectl}" get statefulset \
    "${release}" -n "${release_ns}" -o jsonpath='{.spec.template.spec.containers[0].args[12]}')"
  can no "${sa}" default create pods --subresource=binding
  can no "${sa}" default create pods --subresource=eviction
  can no "${sa}" default delete pods
  can no "${sa}" default patch jobs.batch
  can no "${sa}" default get replicasets.apps
  # No webhook in monitoring mode: a labelled pod is admitted as it is.
  expect_eq "webhook configuration after upgrade to monitoring" "" \
    "$("${kubectl}" get mutatingwebhookconfiguration -l "app.kubernetes.io/instance=${release}" -o name 2>&1)"
  expect_eq "labelled pod admitted without the webhook" "pod/labelled-2 created" \
    "$(webhook_pod labelled-2 "chamber.io/queue: ${release}" 2>&1)"
  can yes "${sa}" - list pods --all-namespaces
  can yes "${sa}" - watch jobs.batch --all-namespaces
  can yes "${sa}" default patch pods --subresource=status
  can yes "${sa}" - patch queues.chamber.io --subresource=status
  can yes "${sa}" "${release_ns}" update leases.coordination.k8s.io/chamber-scheduler
  run_chamberd monitoring

  # helm uninstall removes the release's objects, cluster-scoped ones included; the CRD stays.
  out="$("${helm}" uninstall "${release}" -n "${release_ns}" --wait --timeout 60s 2>&1)" ||
    fail "helm uninstall: ${out}"
  expect_contains "helm uninstall" "release \"${release}\" uninstalled" "${out}"
  expect_eq "objects left after uninstall" "" "$("${kubectl}" get \
    statefulset,daemonset,service,configmap,serviceaccount,role,rolebinding,poddisruptionbudget \
    -n "${release_ns}" -l "app.kubernetes.io/instance=${release}" -o name 2>&1)"
  expect_eq "cluster objects left after uninstall" "" "$("${kubectl}" get clusterrole,clusterrolebinding,mutatingwebhookconfiguration \
    -l "app.kubernetes.io/instance=${release}" -o name 2>&1)"
  expect_eq "crd kept" "customresourcedefinition.apiextensions.k8s.io/queues.chamber.io" \
    "$("${kubectl}" get crd queues.chamber.io -o name 2>&1)"

  run_persistence

  # Time to first dashboard (the issue's target: under 3 minutes).
  if [[ -n "${CHAMBER_CHAMBERD:-}" && -x "${CHAMBER_CHAMBERD}" && -n "${CHAMBER_KUBESIM:-}" &&
    -x "${CHAMBER_KUBESIM}" ]]; then
    time_to_dashboard 1
    local took
    took="$(cat "${work}/ttd-seconds" 2>/dev/null || echo 999)"
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 180 else 1)' "${took}" && pass ||
      fail "time to first dashboard ${took} s, not under 180 s"
  fi
}

# run_persistence: with a default StorageClass, a plain install keeps each replica's history on
# a volume claim of its own; the choice sticks on upgrade (a StatefulSet's claims cannot change),
# a change of it is refused with what to do, and the claims outlive `helm uninstall`.
run_persistence() {
  local rel="chamber-pv$$" ns="chamber-pv-$$" class="chamber-test-default-$$" out
  "${kubectl}" apply -f - >/dev/null <<EOF || fail "storage class: apply"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ${class}
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: example.com/no-provisioner
EOF
  cleanup_steps+=("'${kubectl}' delete storageclass '${class}' --wait=false >/dev/null 2>&1")
  cleanup_steps+=("'${kubectl}' delete namespace '${ns}' --wait=false >/dev/null 2>&1")
  cleanup_steps+=("'${kubectl}' delete clusterrole,clusterrolebinding -l app.kubernetes.io/instance=${rel} >/dev/null 2>&1")
  out="$("${helm}" install "${rel}" "${chart}" -n "${ns}" --create-namespace 2>&1)" ||
    fail "helm install (default StorageClass): ${out}"
  expect_contains "NOTES: history on claims" "PersistentVolumeClaims
data-${rel}-<n>, 2Gi, storage class the cluster's default" "${out}"
  expect_eq "volume claim template" '[{"metadata":{"labels":{"app.kubernetes.io/component":"chamberd","app.kubernetes.io/instance":"'"${rel}"'","app.kubernetes.io/name":"chamber"},"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"2Gi"}}}}]' \
    "$("${kubectl}" get statefulset "${rel}" -n "${ns}" -o json | python3 -c 'import json, sys; t = json.load(sys.stdin)["spec"]["volumeClaimTemplates"]; [c.pop(k, None) for c in t for k in ("apiVersion", "kind", "status")]; [c["spec"].pop("volumeMode", None) for c in t]; print(json.dumps(t, separators=(",", ":"), sort_keys=True))')"
  expect_eq "no emptyDir for the history" "" "$("${kubectl}" get statefulset "${rel}" -n "${ns}" \
    -o jsonpath='{.spec.template.spec.volumes[?(@.name=="data")].name}')"
  # The StatefulSet controller makes one claim per replica, of the default class.
  local claims="" i
  for ((i = 0; i < 100; i++)); do
    claims="$("${kubectl}" get pvc -n "${ns}" -l "app.kubernetes.io/instance=${rel}" \
      -o jsonpath='{range .items[*]}{.metadata.name}={.spec.storageClassName} {end}' 2>&1)"
    [[ "${claims}" == "data-${rel}-0=${class} data-${rel}-1=${class} " ]] && break
    sleep 0.2
  done
  expect_eq "a claim per replica" "data-${rel}-0=${class} data-${rel}-1=${class} " "${claims}"

  # The choice sticks: with no default class any more, an upgrade keeps the claims.
  "${kubectl}" annotate storageclass "${class}" storageclass.kubernetes.io/is-default-class- >/dev/null
  out="$("${helm}" upgrade "${rel}" "${chart}" -n "${ns}" --reuse-values 2>&1)" ||
    fail "helm upgrade (auto, installed with claims): ${out}"
  expect_eq "claims kept on upgrade" "data" "$("${kubectl}" get statefulset "${rel}" -n "${ns}" \
    -o jsonpath='{.spec.volumeClaimTemplates[*].metadata.name}')"
  # A change the StatefulSet cannot take is refused, saying what to do.
  if out="$("${helm}" upgrade "${rel}" "${chart}" -n "${ns}" --reuse-values \
    --set chamberd.persistence.enabled=false 2>&1)"; then
    fail "helm upgrade to emptyDirs over installed claims succeeded"
  else
    expect_contains "switching persistence refused" "chamberd.persistence: the installed StatefulSet ${rel} keeps the history on volume claims, and a StatefulSet's volumes cannot change in place: delete the StatefulSet and keep its pods and claims (kubectl -n ${ns} delete statefulset ${rel} --cascade=orphan)" "${out}"
  fi
  if out="$("${helm}" upgrade "${rel}" "${chart}" -n "${ns}" --reuse-values \
    --set chamberd.persistence.size=5Gi 2>&1)"; then
    fail "helm upgrade to another claim size succeeded"
  else
    expect_contains "resizing refused" "claims 2Gi of storage class \"(the default)\"; its volume claims cannot change in place" "${out}"
  fi
  # The documented switch: orphan the StatefulSet, then upgrade.
  "${kubectl}" delete statefulset "${rel}" -n "${ns}" --cascade=orphan >/dev/null
  out="$("${helm}" upgrade "${rel}" "${chart}" -n "${ns}" --reuse-values \
    --set chamberd.persistence.enabled=false 2>&1)" || fail "helm upgrade after orphaning: ${out}"
  expect_eq "emptyDir after the switch" '{"emptyDir": {}, "name": "data"}' \
    "$("${kubectl}" get statefulset "${rel}" -n "${ns}" -o json | python3 -c 'import json, sys; print(json.dumps([v for v in json.load(sys.stdin)["spec"]["template"]["spec"]["volumes"] if v["name"] == "data"][0], sort_keys=True))')"

  # The claims outlive the release, and with them the history.
  out="$("${helm}" uninstall "${rel}" -n "${ns}" --wait --timeout 60s 2>&1)" || fail "helm uninstall: ${out}"
  expect_eq "claims after uninstall" "data-${rel}-0 data-${rel}-1" "$("${kubectl}" get pvc -n "${ns}" \
    -l "app.kubernetes.io/instance=${rel}" -o jsonpath='{.items[*].metadata.name}')"
  "${kubectl}" delete pvc -n "${ns}" -l "app.kubernetes.io/instance=${rel},app.kubernetes.io/component=chamberd" \
    --wait=false >/dev/null || fail "deleting the claims"
}

# time_to_dashboard <run>: seconds from the start of `helm install` (defaults: monitoring mode)
# to the first /api/v1/fleet answer, with the chart's dashboard token, that counts every GPU of
# the cluster's nodes; fake GPU nodes (CHAMBER_KUBESIM, 4 nodes x 8 GPUs) exist beforehand. No
# kubelet runs here, so where a cluster would pull the image and start the pod, chamberd
# (CHAMBER_CHAMBERD) is started as a local process with the installed StatefulSet's arguments
# and its service account's token. Prints "time-to-dashboard <run>: <seconds> s".
time_to_dashboard() {
  local run="$1" rel="chamber-ttd$$-$1" ns="chamber-ttd-$$-$1" nodes=4 gpus=8
  local dir="${work}/ttd-${run}" node_prefix="chamber-ttd$$-$1-gpu"
  mkdir -p "${dir}/data"
  "${CHAMBER_KUBESIM}" --kubeconfig "${KUBECONFIG}" nodes create --count "${nodes}" --gpus "${gpus}" \
    --prefix "${node_prefix}" >"${dir}/kubesim.log" 2>&1 || fail "chamber-kubesim nodes create: $(cat "${dir}/kubesim.log")"
  local i
  for ((i = 0; i < nodes; i++)); do
    cleanup_steps+=("'${kubectl}' delete node '${node_prefix}-${i}' --wait=false >/dev/null 2>&1")
  done
  cleanup_steps+=("'${kubectl}' delete namespace '${ns}' --wait=false >/dev/null 2>&1")
  cleanup_steps+=("'${kubectl}' delete clusterrole,clusterrolebinding -l app.kubernetes.io/instance=${rel} >/dev/null 2>&1")
  # Every GPU the cluster's nodes offer (other tests' nodes included): what the dashboard must show.
  local want
  want="$("${kubectl}" get nodes -o jsonpath='{range .items[*]}{.status.capacity.nvidia\.com/gpu}{"\n"}{end}' |
    awk '{n += $1} END {print n + 0}')"

  local t0 out
  t0="$(date +%s.%N)"
  out="$("${helm}" install "${rel}" "${chart}" -n "${ns}" --create-namespace 2>&1)" ||
    fail "time-to-dashboard: helm install: ${out}"
  local t_helm
  t_helm="$(date +%s.%N)"
  # What the kubelet would start: chamberd with the StatefulSet's arguments and the token.
  local port hport args=()
  sa_kubeconfig "${rel}" "${ns}" >"${dir}/kubeconfig" || fail "time-to-dashboard: token for ${rel}"
  port="$(free_port)"
  hport="$(free_port)"
  installed_chamberd_args "${rel}" "${ns}" "${dir}" "${port}" "${hport}" 0
  local t_start
  t_start="$(date +%s.%N)"
  POD_NAMESPACE="${ns}" "${CHAMBER_CHAMBERD}" --kubeconfig "${dir}/kubeconfig" "${args[@]}" \
    --identity "ttd-${run}" >"${dir}/log" 2>&1 &
  local pid=$! dash_token got="" seconds="" t_end=""
  dash_token="$("${kubectl}" create token "${rel}-dashboard" -n "${ns}" --duration 10m)"
  for ((i = 0; i < 1800; i++)); do
    got="$(curl -s -m 2 -H "Authorization: Bearer ${dash_token}" "http://127.0.0.1:${port}/api/v1/fleet" |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["summary"]["gpus"]["capacity"])' 2>/dev/null || true)"
    if [[ -n "${got}" && "${got%.*}" -ge "${want}" ]]; then
      t_end="$(date +%s.%N)"
      seconds="$(elapsed "${t0}" "${t_end}")"
      break
    fi
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM "${pid}" 2>/dev/null || true
  wait "${pid}" || true
  if [[ -n "${seconds}" ]]; then
    pass
    printf 'time-to-dashboard %s: %s s (helm install %s s, token and arguments %s s, chamberd start to dashboard %s s; %s GPUs)\n' \
      "${run}" "${seconds}" "$(elapsed "${t0}" "${t_helm}")" "$(elapsed "${t_helm}" "${t_start}")" \
      "$(elapsed "${t_start}" "${t_end}")" "${want}"
    echo "${seconds}" >>"${work}/ttd-seconds"
  else
    fail "time-to-dashboard ${run}: /api/v1/fleet never counted ${want} GPUs (last: '${got}'); log: $(tail -n 20 "${dir}/log")"
  fi
  "${helm}" uninstall "${rel}" -n "${ns}" >/dev/null 2>&1 || true
  "${kubectl}" delete node "${node_prefix}-"{0..3} --wait=true >/dev/null 2>&1 || true
}

# run_timing [runs]: time_to_dashboard that many times (default 3), then the median.
run_timing() {
  [[ -x "${kubectl}" ]] || die "kubectl not found"
  [[ -n "${CHAMBER_CHAMBERD:-}" && -x "${CHAMBER_CHAMBERD}" && -n "${CHAMBER_KUBESIM:-}" &&
    -x "${CHAMBER_KUBESIM}" ]] || die "timing: CHAMBER_CHAMBERD and CHAMBER_KUBESIM must name the built binaries"
  local runs="${1:-3}" r
  for ((r = 1; r <= runs; r++)); do time_to_dashboard "${r}"; done
  [[ -s "${work}/ttd-seconds" ]] &&
    printf 'time-to-dashboard: median %s s of %d runs\n' \
      "$(sort -n "${work}/ttd-seconds" | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')" \
      "$(wc -l <"${work}/ttd-seconds")"
}

# pem_fingerprints <PEM file>: the SHA-256 fingerprint of each certificate in the file, sorted,
# one per line (a caBundle compared by what it trusts, not by how its PEM is laid out).
pem_fingerprints() {
  python3 - "$1" <<'EOF'
import base64, hashlib, re, sys
pem = open(sys.argv[1]).read()
blocks = re.findall(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", pem, re.S)
print("\n".join(sorted(hashlib.sha256(base64.b64decode("".join(b.split()))).hexdigest()[:16] for b in blocks)))
EOF
}

# served_fingerprint <host> <port>: the fingerprint of the certificate served on 127.0.0.1:<port>
# to a client asking for <host>.
served_fingerprint() {
  openssl s_client -connect "127.0.0.1:$2" -servername "$1" </dev/null 2>/dev/null |
    openssl x509 >"${work}/served.pem" 2>/dev/null && pem_fingerprints "${work}/served.pem"
}

# wait_for <seconds> <want> <command>...: runs the command every 0.2 s until it prints <want> or
# the time is up; prints its last output.
wait_for() {
  local deadline=$((SECONDS + $1)) want="$2" got=""
  shift 2
  while :; do
    got="$("$@" 2>&1 || true)"
    [[ "${got}" == "${want}" || ${SECONDS} -ge ${deadline} ]] && break
    sleep 0.2
  done
  printf '%s\n' "${got}"
}

# mwc_bundles <configuration> <file prefix>: each entry's caBundle decoded into
# <prefix>.<index>.pem; prints the fingerprints each entry trusts, one entry a word.
mwc_bundles() {
  local i=0 b out=()
  for b in $("${kubectl}" get mutatingwebhookconfiguration "$1" \
    -o jsonpath='{range .webhooks[*]}-{.clientConfig.caBundle} {end}'); do
    printf '%s' "${b#-}" | base64 -d >"$2.${i}.pem" 2>/dev/null || true
    out+=("$(pem_fingerprints "$2.${i}.pem" | paste -sd, -)")
    i=$((i + 1))
  done
  printf '%s\n' "${out[*]}"
}

# run_cert_manager: the webhook's certificate from a live cert-manager on the test control plane
# (docs/admission.md, "The certificate"): the cert-manager binary that
# scripts/workload-controllers.sh builds from upstream's module (its controllers and CA
# injector). The cluster serves cert-manager.io/v1 only while this runs (the CRDs go again at
# the end, so that other tests' installs keep Helm's certificate), and `source: auto` picks
# cert-manager. The release's CA and the webhook's certificate are issued; the CA injector puts
# the CA, and only it, in every entry's caBundle; chamberd, run with the installed arguments and
# the Secret's files, answers an AdmissionReview over HTTPS for the Service's host name, trusted
# through that caBundle. A renewal issues a new certificate from the same CA: the caBundle stays
# as it was, and chamberd serves the new certificate from the first handshake after the files
# change, still trusted. Then issuerRef: a CA ClusterIssuer's certificate, its CA in every
# entry. helm uninstall takes the Certificates and Issuers away.
run_cert_manager() {
  [[ -x "${kubectl}" ]] || die "kubectl not found"
  [[ -n "${CHAMBER_CHAMBERD:-}" && -x "${CHAMBER_CHAMBERD}" ]] ||
    die "cert-manager: CHAMBER_CHAMBERD must name the built chamberd"
  command -v openssl >/dev/null || die "openssl is needed"
  local bin
  bin="$("${root}/scripts/workload-controllers.sh" bin-dir)"
  [[ -x "${bin}/cert-manager" ]] ||
    die "cert-manager is not built in ${bin}; run scripts/workload-controllers.sh build"
  "${kubectl}" get crd certificates.cert-manager.io >/dev/null 2>&1 &&
    die "the cluster already serves cert-manager.io: this test installs and removes its CRDs"
  release="chamber-cm$$"
  release_ns="chamber-cm-test-$$"
  local name="${release}-webhook" out crds=() f
  local host="${name}.${release_ns}.svc" dir="${work}/cm"
  mkdir -p "${dir}/webhook" "${dir}/data" "${dir}/ca" "${dir}/renewed"

  for f in certificates certificaterequests issuers clusterissuers; do
    crds+=(-f "${bin}/crds/cert-manager.io_${f}.yaml")
  done
  cleanup_steps+=("'${kubectl}' delete ${crds[*]} --ignore-not-found --wait=true >/dev/null 2>&1")
  out="$("${kubectl}" apply --server-side "${crds[@]}" 2>&1)" || die "cert-manager CRDs: ${out}"
  expect_eq "cert-manager CRDs established" "True True True True" \
    "$(wait_for 60 "True True True True" "${kubectl}" get "${crds[@]}" \
      -o jsonpath='{.items[*].status.conditions[?(@.type=="Established")].status}')"
  # ClusterIssuers read their Secrets in a namespace of this test's.
  "${kubectl}" create namespace "${release_ns}" >/dev/null
  cleanup_steps+=("'${kubectl}' delete namespace '${release_ns}' --wait=false >/dev/null 2>&1")
  "${kubectl}" create namespace "${release_ns}-issuers" >/dev/null
  cleanup_steps+=("'${kubectl}' delete namespace '${release_ns}-issuers' --wait=false >/dev/null 2>&1")
  "${bin}/cert-manager" --kubeconfig "${KUBECONFIG}" \
    --cluster-resource-namespace "${release_ns}-issuers" >"${work}/cert-manager.log" 2>&1 &
  local cm_pid=$!
  cleanup_steps+=("kill ${cm_pid} 2>/dev/null; wait ${cm_pid} 2>/dev/null")

  cleanup_steps+=("'${kubectl}' delete clusterrole,clusterrolebinding,mutatingwebhookconfiguration -l app.kubernetes.io/instance=${release} >/dev/null 2>&1")
  # Scheduling mode, the webhook limited to a namespace no pod is made in; a 90-day certificate.
  local webhook_selector="{\"matchLabels\":{\"chamber-helm-test/webhook\":\"${release_ns}\"}}"
  out="$("${helm}" install "${release}" "${chart}" -n "${release_ns}" --set mode=scheduling \
    --set webhook.certificate.validityDays=90 --set-json "webhook.namespaceSelector=${webhook_selector}" 2>&1)" ||
    fail "helm install (cert-manager): ${out}"
  expect_eq "source auto: cert-manager's objects, no Secret of Helm's" \
    "Certificate/${name} Certificate/${name}-ca Issuer/${name}-ca Issuer/${name}-selfsigned Secret:0" \
    "$("${helm}" get manifest "${release}" -n "${release_ns}" | python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
cm = sorted(d["kind"] + "/" + d["metadata"]["name"] for d in docs if d["apiVersion"] == "cert-manager.io/v1")
print(" ".join(cm), "Secret:%d" % sum(d["kind"] == "Secret" for d in docs))')"

  local ready='{.status.conditions[?(@.type=="Ready")].status}'
  expect_eq "the release's CA issued" "True" \
    "$(wait_for 60 True "${kubectl}" get certificate "${name}-ca" -n "${release_ns}" -o jsonpath="${ready}")"
  expect_eq "the webhook's certificate issued" "True" \
    "$(wait_for 60 True "${kubectl}" get certificate "${name}" -n "${release_ns}" -o jsonpath="${ready}")"
  secret_files "${name}-tls" "${release_ns}" "${dir}/webhook"
  secret_files "${name}-ca" "${release_ns}" "${dir}/ca"
  expect_eq "the CA's certificate is a CA" "CA:TRUE" \
    "$(openssl x509 -in "${dir}/ca/tls.crt" -noout -ext basicConstraints 2>&1 | grep -o 'CA:[A-Z]*')"
  expect_eq "the webhook's Secret names the release's CA" "$(pem_fingerprints "${dir}/ca/tls.crt")" \
    "$(pem_fingerprints "${dir}/webhook/ca.crt")"
  expect_eq "the webhook's certificate is not a CA" "" \
    "$(openssl x509 -in "${dir}/webhook/tls.crt" -noout -ext basicConstraints 2>&1 | grep -o 'CA:TRUE')"
  local h
  for h in "${host}" "${name}.${release_ns}.svc.cluster.local"; do
    expect_eq "the certificate verifies for ${h} through the CA" "${dir}/webhook/tls.crt: OK" \
      "$(openssl verify -CAfile "${dir}/webhook/ca.crt" -verify_hostname "${h}" "${dir}/webhook/tls.crt" 2>&1)"
  done
  expect_eq "the certificate lasts validityDays" "90" "$(python3 -c '
import subprocess, sys
from datetime import datetime
out = subprocess.run(["openssl", "x509", "-in", sys.argv[1], "-noout", "-startdate", "-enddate"],
                     capture_output=True, text=True, check=True).stdout.splitlines()
t = [datetime.strptime(l.split("=", 1)[1], "%b %d %H:%M:%S %Y %Z") for l in out]
print(round((t[1] - t[0]).total_seconds() / 86400))' "${dir}/webhook/tls.crt")"

  # The CA injector: every entry trusts the release's CA and nothing else.
  local ca_fp entries
  ca_fp="$(pem_fingerprints "${dir}/webhook/ca.crt")"
  entries="${ca_fp} ${ca_fp} ${ca_fp} ${ca_fp}"
  expect_eq "caBundle of every entry: the release's CA" "${entries}" \
    "$(wait_for 30 "${entries}" mwc_bundles "${release}" "${dir}/bundle")"

  # chamberd, as the kubelet would start it: the installed arguments and the Secret's files.
  local port hport wport args=()
  sa_kubeconfig "${release}" "${release_ns}" >"${dir}/kubeconfig" || fail "token for ${release}"
  port="$(free_port)"
  hport="$(free_port)"
  wport="$(free_port)"
  installed_chamberd_args "${release}" "${release_ns}" "${dir}" "${port}" "${hport}" "${wport}"
  POD_NAMESPACE="${release_ns}" POD_NAME="${release}-0" "${CHAMBER_CHAMBERD}" \
    --kubeconfig "${dir}/kubeconfig" "${args[@]}" --identity "test-cm" >"${dir}/log" 2>&1 &
  local pid=$!
  cleanup_steps+=("kill ${pid} 2>/dev/null; wait ${pid} 2>/dev/null")
  expect_eq "chamberd /healthz" "ok" \
    "$(wait_for 30 ok bash -c "curl -s -m 1 http://127.0.0.1:${port}/healthz | cut -c1-2")"
  expect_eq "webhook over cert-manager's certificate, trusted through the injected caBundle" \
    "${review_patched}" "$(review_labelled_pod "${host}" "${wport}" "${dir}/bundle.0.pem")"
  local first
  first="$(pem_fingerprints "${dir}/webhook/tls.crt")"
  expect_eq "chamberd serves the issued certificate" "${first}" "$(served_fingerprint "${host}" "${wport}")"

  # A renewal, asked for as `cmctl renew` asks: the Issuing condition.
  local now
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  out="$("${kubectl}" patch certificate "${name}" -n "${release_ns}" --subresource status --type json \
    -p "[{\"op\":\"add\",\"path\":\"/status/conditions/-\",\"value\":{\"type\":\"Issuing\",\"status\":\"True\",\"reason\":\"ManuallyTriggered\",\"message\":\"renewal asked for by the test\",\"lastTransitionTime\":\"${now}\"}}]" 2>&1)" ||
    fail "asking for a renewal: ${out}"
  expect_eq "renewed: the certificate's second revision" "2 True" \
    "$(wait_for 60 "2 True" "${kubectl}" get certificate "${name}" -n "${release_ns}" -o jsonpath="{.status.revision} ${ready}")"
  secret_files "${name}-tls" "${release_ns}" "${dir}/renewed"
  local second
  second="$(pem_fingerprints "${dir}/renewed/tls.crt")"
  if [[ -n "${second}" && "${second}" != "${first}" ]]; then pass; else
    fail "renewal: the Secret still holds the first certificate (${first})"
  fi
  expect_eq "renewal keeps the CA" "${ca_fp}" "$(pem_fingerprints "${dir}/renewed/ca.crt")"
  expect_eq "the renewed certificate verifies for ${host} through the same CA" "${dir}/renewed/tls.crt: OK" \
    "$(openssl verify -CAfile "${dir}/webhook/ca.crt" -verify_hostname "${host}" "${dir}/renewed/tls.crt" 2>&1)"
  # The injector answers a Secret's change within a second here; a CA that changed with the
  # certificate would be in every entry by then, beside the old one.
  sleep 3
  expect_eq "renewal leaves the caBundle as it was" "${entries}" "$(mwc_bundles "${release}" "${dir}/bundle")"
  # Until the kubelet swaps the files, chamberd serves the first certificate, still trusted; from
  # the first handshake after the swap, the renewed one.
  expect_eq "before the swap: the first certificate" "${first}" "$(served_fingerprint "${host}" "${wport}")"
  secret_files "${name}-tls" "${release_ns}" "${dir}/webhook"
  expect_eq "after the swap: the renewed certificate" "${second}" \
    "$(wait_for 10 "${second}" served_fingerprint "${host}" "${wport}")"
  expect_eq "webhook over the renewed certificate, same caBundle" "${review_patched}" \
    "$(review_labelled_pod "${host}" "${wport}" "${dir}/bundle.0.pem")"
  expect_contains "chamberd counts the reload (its health port's metrics)" \
    "chamber_webhook_certificate_reloads_total 1" "$(curl -s "http://127.0.0.1:${hport}/metrics")"
  kill -TERM "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true

  # issuerRef: a CA ClusterIssuer of the cluster's own (a CA made here) signs the certificate
  # instead; the release's CA objects go, and every entry trusts the new CA (beside the
  # release's, which the injector keeps while its certificate is valid).
  mkdir -p "${dir}/corp"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=corp-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "${dir}/corp/tls.key" -out "${dir}/corp/tls.crt" >/dev/null 2>&1 || fail "making the corp CA"
  out="$("${kubectl}" create secret tls corp-ca -n "${release_ns}-issuers" \
    --cert "${dir}/corp/tls.crt" --key "${dir}/corp/tls.key" 2>&1)" || fail "corp CA Secret: ${out}"
  out="$("${kubectl}" apply -f - 2>&1 <<EOF
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: ${release}-corp}
spec: {ca: {secretName: corp-ca}}
EOF
  )" || fail "ClusterIssuer: ${out}"
  out="$("${helm}" upgrade "${release}" "${chart}" -n "${release_ns}" --reuse-values \
    --set "webhook.certificate.issuerRef.name=${release}-corp" \
    --set webhook.certificate.issuerRef.kind=ClusterIssuer 2>&1)" || fail "helm upgrade (issuerRef): ${out}"
  expect_eq "issuerRef: the release's CA objects gone" "" \
    "$("${kubectl}" get issuers.cert-manager.io -n "${release_ns}" -o name 2>&1)$("${kubectl}" get \
      certificates.cert-manager.io -n "${release_ns}" -o name 2>&1 | grep -v "/${name}$")"
  expect_eq "issuerRef: re-issued by the ClusterIssuer" "3 True" \
    "$(wait_for 60 "3 True" "${kubectl}" get certificate "${name}" -n "${release_ns}" -o jsonpath="{.status.revision} ${ready}")"
  mkdir -p "${dir}/corp-issued"
  secret_files "${name}-tls" "${release_ns}" "${dir}/corp-issued"
  local corp_fp
  corp_fp="$(pem_fingerprints "${dir}/corp/tls.crt")"
  expect_eq "issuerRef: the Secret's CA is the ClusterIssuer's" "${corp_fp}" \
    "$(pem_fingerprints "${dir}/corp-issued/ca.crt")"
  expect_eq "issuerRef: the certificate verifies through it" "${dir}/corp-issued/tls.crt: OK" \
    "$(openssl verify -CAfile "${dir}/corp/tls.crt" -verify_hostname "${host}" "${dir}/corp-issued/tls.crt" 2>&1)"
  local both
  both="$(printf '%s\n%s\n' "${ca_fp}" "${corp_fp}" | sort | paste -sd, -)"
  expect_eq "issuerRef: every entry trusts the ClusterIssuer's CA" "${both} ${both} ${both} ${both}" \
    "$(wait_for 30 "${both} ${both} ${both} ${both}" mwc_bundles "${release}" "${dir}/bundle")"

  out="$("${helm}" uninstall "${release}" -n "${release_ns}" --wait --timeout 60s 2>&1)" ||
    fail "helm uninstall (cert-manager): ${out}"
  expect_eq "uninstall: no Certificate or Issuer left" "" \
    "$("${kubectl}" get certificates.cert-manager.io,issuers.cert-manager.io -n "${release_ns}" -o name 2>&1)"
  ((failures == 0)) || { echo "--- cert-manager log, last 40 lines:"; tail -n 40 "${work}/cert-manager.log"; }
}

case "${mode}" in
  lint) run_lint ;;
  apply) run_apply ;;
  timing) run_timing "${2:-3}" ;;
  cert-manager) run_cert_manager ;;
  *) die "usage: chart_test.sh lint|apply|cert-manager|timing [runs]" ;;
esac

printf 'chart_test %s: %d checks passed, %d failed\n' "${mode}" "${checks}" "${failures}"
((failures == 0))
