#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for tests: etcd and kube-apiserver, optionally
# kube-controller-manager and kube-scheduler, built from the Go module in tools/controlplane.
#
# Usage:
#   scripts/controlplane.sh build [--all] [--controller-manager] [--scheduler] [--k8s-1.35]
#       Build etcd and kube-apiserver (--all: also kube-controller-manager and kube-scheduler;
#       --k8s-1.35: also the kube-apiserver of Kubernetes 1.35, from tools/controlplane-1.35)
#       into the cache, skipping binaries already built for this exact module; print the bin dir.
#   scripts/controlplane.sh bin-dir [--k8s-1.35]
#       Print the bin dir for the pinned module, or the 1.35 one (built or not).
#   scripts/controlplane.sh start <dir> [--controller-manager] [--scheduler] [--k8s-1.35]
#       Generate certificates and keys, start the components on free loopback ports, wait until
#       they are ready, and write <dir>/kubeconfig, <dir>/env and <dir>/pids; logs go to
#       <dir>/logs/. Anything still running from an earlier start in <dir> is stopped first.
#       On any failure everything started is stopped again. --k8s-1.35: the 1.35 kube-apiserver
#       (with the v1alpha1 Workload API on) in place of the pinned one, with the pinned etcd;
#       neither controller-manager nor scheduler.
#   scripts/controlplane.sh stop <dir>
#       Stop everything started in <dir> (TERM, then KILL after a grace period). Idempotent.
#   scripts/controlplane.sh status <dir>
#       Show each component and whether the apiserver is ready; exit 0 only if all are up.
#
# Environment:
#   CHAMBER_CONTROLPLANE_CACHE     cache root (default: ~/.cache/chamber/controlplane, or under
#                                  $XDG_CACHE_HOME when set)
#   CHAMBER_CONTROLPLANE_BIN       use the binaries in this directory instead of the cache
#   CHAMBER_CONTROLPLANE_TIMEOUT   seconds to wait for each component to be ready (default 90)
#   CHAMBER_CONTROLPLANE_STOP_GRACE  seconds between TERM and KILL on stop (default 5)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly root
readonly pinned_module_dir="${root}/tools/controlplane"
# The module the functions below build from: the pinned one, or tools/controlplane-1.35.
module_dir="${pinned_module_dir}"

log() { printf 'controlplane: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The pinned Kubernetes release, as go.mod requires it (e.g. v1.34.4).
k8s_version() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "${module_dir}/go.mod"
}

# The cache key: the release plus a hash of everything that decides the binaries' content.
module_hash() {
  (cd "${module_dir}" && cat go.mod go.sum cmd/*/main.go && declare -f go_ldflags) |
    sha256sum | cut -c1-12
}

bin_dir() {
  if [[ -n "${CHAMBER_CONTROLPLANE_BIN:-}" ]]; then
    printf '%s\n' "${CHAMBER_CONTROLPLANE_BIN}"
    return
  fi
  local cache="${XDG_CACHE_HOME:-${HOME}/.cache}/chamber/controlplane"
  cache="${CHAMBER_CONTROLPLANE_CACHE:-${cache}}"
  printf '%s/%s-%s/bin\n' "${cache}" "$(k8s_version)" "$(module_hash)"
}

# Version stamp, as Kubernetes' hack/lib/version.sh sets it, so /version reports the release.
go_ldflags() {
  local version="$1" major minor pkg flags="-s -w"
  major="${version#v}" && major="${major%%.*}"
  minor="${version#v*.}" && minor="${minor%%.*}"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=" -X '${pkg}.gitVersion=${version}' -X '${pkg}.gitMajor=${major}'"
    flags+=" -X '${pkg}.gitMinor=${minor}' -X '${pkg}.gitTreeState=clean'"
  done
  printf '%s\n' "${flags}"
}

# Fails with a clear message unless a Go toolchain at least as new as go.mod's is on PATH.
check_go() {
  [[ -x /usr/local/go/bin/go ]] && PATH="${PATH}:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 ||
    die "'go' is not on PATH; install Go (scripts/install-deps.sh checks for it)"
  local want have
  want="$(awk '$1 == "go" { print $2; exit }' "${module_dir}/go.mod")"
  have="$(go env GOVERSION)"
  have="${have#go}"
  [[ "$(printf '%s\n%s\n' "${want}" "${have}" | sort -V | head -n 1)" == "${want}" ]] ||
    die "Go ${have} is older than ${want}, which ${module_dir#"${root}/"}/go.mod needs"
}

readonly k8s_135_module_dir="${root}/tools/controlplane-1.35"

cmd_bin_dir() {
  case "${1:-}" in
    "") ;;
    --k8s-1.35) module_dir="${k8s_135_module_dir}" ;;
    *) die "bin-dir: unknown option '$1'" ;;
  esac
  bin_dir
}

cmd_build() {
  local components=(etcd kube-apiserver) arg k8s_135=0
  for arg in "$@"; do
    case "${arg}" in
      --all) components+=(kube-controller-manager kube-scheduler) ;;
      --controller-manager) components+=(kube-controller-manager) ;;
      --scheduler) components+=(kube-scheduler) ;;
      --k8s-1.35) k8s_135=1 ;;
      *) die "build: unknown option '${arg}'" ;;
    esac
  done
  build_module "${components[@]}"
  if ((k8s_135)); then
    module_dir="${k8s_135_module_dir}"
    build_module kube-apiserver >/dev/null
    module_dir="${pinned_module_dir}"
  fi
}

# build_module <component>...: builds what is missing of them from ${module_dir} into its bin dir.
build_module() {
  local dir missing=() pkgs=() c
  dir="$(bin_dir)"
  for c in $(printf '%s\n' "$@" | sort -u); do
    [[ -x "${dir}/${c}" ]] || { missing+=("${c}") && pkgs+=("./cmd/${c}"); }
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "up to date in ${dir}"
    printf '%s\n' "${dir}"
    return 0
  fi
  check_go
  log "building ${missing[*]} ($(k8s_version)) into ${dir}"
  mkdir -p "${dir}"
  local tmp start=${SECONDS}
  tmp="$(mktemp -d "${dir}/.build.XXXXXX")"
  # -mod=readonly with the committed go.sum: the same sources on every machine.
  if ! (cd "${module_dir}" && go build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "$(go_ldflags "$(k8s_version)")" -o "${tmp}/" "${pkgs[@]}"); then
    rm -rf "${tmp}"
    die "go build failed"
  fi
  for c in "${missing[@]}"; do mv "${tmp}/${c}" "${dir}/${c}"; done
  rmdir "${tmp}"
  log "built ${missing[*]} in $((SECONDS - start))s"
  printf '%s\n' "${dir}"
}

# ---------------------------------------------------------------------------------------------
# start / stop / status

# free_ports <n>: n distinct free TCP ports on 127.0.0.1, one per line.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
EOF
}

# gen_cert <pki> <name> <subject> [<subjectAltName>]: key and certificate signed by the CA.
gen_cert() {
  local pki="$1" name="$2" subject="$3" san="${4:-}" ext="${1}/${2}.ext"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${pki}/${name}.key" \
    2>/dev/null
  openssl req -new -key "${pki}/${name}.key" -subj "${subject}" -out "${pki}/${name}.csr"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    if [[ -n "${san}" ]]; then
      echo "extendedKeyUsage = serverAuth"
      echo "subjectAltName = ${san}"
    else
      echo "extendedKeyUsage = clientAuth"
    fi
  } >"${ext}"
  openssl x509 -req -in "${pki}/${name}.csr" -CA "${pki}/ca.crt" -CAkey "${pki}/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "${ext}" -out "${pki}/${name}.crt" 2>/dev/null
  rm -f "${pki}/${name}.csr" "${ext}"
}

gen_pki() {
  local pki="$1"
  command -v openssl >/dev/null 2>&1 || die "openssl is missing; run scripts/install-deps.sh"
  mkdir -p "${pki}"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "${pki}/ca.key" \
    2>/dev/null
  openssl req -x509 -new -key "${pki}/ca.key" -subj "/CN=chamber-test-ca" -days 3650 \
    -sha256 -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out "${pki}/ca.crt"
  gen_cert "${pki}" apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  gen_cert "${pki}" admin "/O=system:masters/CN=chamber-admin"
  gen_cert "${pki}" controller-manager "/CN=system:kube-controller-manager"
  gen_cert "${pki}" scheduler "/CN=system:kube-scheduler"
  # Service-account token signing keys (TokenRequest, and tokens the apiserver accepts).
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${pki}/sa.key" 2>/dev/null
  openssl pkey -in "${pki}/sa.key" -pubout -out "${pki}/sa.pub"
  chmod 0600 "${pki}"/*.key
}

# write_kubeconfig <file> <server> <pki> <user>: credentials embedded, so the file stands alone.
write_kubeconfig() {
  local file="$1" server="$2" pki="$3" user="$4"
  cat >"${file}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: chamber-test
  cluster:
    server: ${server}
    certificate-authority-data: $(base64 -w0 "${pki}/ca.crt")
users:
- name: ${user}
  user:
    client-certificate-data: $(base64 -w0 "${pki}/${user}.crt")
    client-key-data: $(base64 -w0 "${pki}/${user}.key")
contexts:
- name: chamber-test
  context:
    cluster: chamber-test
    user: ${user}
current-context: chamber-test
EOF
  chmod 0600 "${file}"
}

# launch <dir> <name> <binary> <args...>: starts a component in the background, its output in
# <dir>/logs/<name>.log, and records it in <dir>/pids.
launch() {
  local dir="$1" name="$2" binary
  binary="$(readlink -f "$3")"
  shift 3
  "${binary}" "$@" </dev/null >"${dir}/logs/${name}.log" 2>&1 &
  local pid=$! i
  printf '%s %s %s\n' "${name}" "${pid}" "${binary}" >>"${dir}/pids"
  # Until the forked shell has exec'd, /proc/<pid>/exe is the shell, and alive() says no.
  for ((i = 0; i < 100; i++)); do
    [[ "$(readlink "/proc/${pid}/exe" 2>/dev/null)" == "${binary}" ]] && break
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.05
  done
  log "started ${name} (pid ${pid})"
}

pid_of() { awk -v n="$2" '$1 == n { print $2 }' "$1/pids" 2>/dev/null; }

# alive <pid> <binary>: the process runs and is still that binary (pids get reused; a binary
# rebuilt since it started shows as "<binary> (deleted)").
alive() {
  local exe
  [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null || return 1
  exe="$(readlink "/proc/$1/exe" 2>/dev/null)" || return 1
  [[ "${exe}" == "$2" || "${exe}" == "$2 (deleted)" ]]
}

fail_component() {
  local dir="$1" name="$2" why="$3"
  log "error: ${name} ${why}; last lines of ${dir}/logs/${name}.log:"
  tail -n 30 "${dir}/logs/${name}.log" >&2 || true
  exit 1
}

# wait_ready <dir> <name> <url> [curl args...]: polls url until it answers 200 "ok".
wait_ready() {
  local dir="$1" name="$2" url="$3"
  shift 3
  local pid binary deadline=$((SECONDS + ${CHAMBER_CONTROLPLANE_TIMEOUT:-90}))
  pid="$(pid_of "${dir}" "${name}")"
  binary="$(awk -v n="${name}" '$1 == n { print $3 }' "${dir}/pids")"
  while true; do
    alive "${pid}" "${binary}" || fail_component "${dir}" "${name}" "exited during startup"
    if [[ "$(curl -s --max-time 2 "$@" "${url}" 2>/dev/null)" == "ok" ]]; then
      return 0
    fi
    ((SECONDS < deadline)) ||
      fail_component "${dir}" "${name}" \
        "was not ready at ${url} after ${CHAMBER_CONTROLPLANE_TIMEOUT:-90}s"
    sleep 0.2
  done
}

cmd_start() {
  [[ $# -ge 1 && "$1" != --* ]] || die "start: missing <dir>"
  local dir="$1" with_cm=0 with_sched=0 k8s_135=0 arg
  shift
  for arg in "$@"; do
    case "${arg}" in
      --controller-manager) with_cm=1 ;;
      --scheduler) with_sched=1 ;;
      --k8s-1.35) k8s_135=1 ;;
      *) die "start: unknown option '${arg}'" ;;
    esac
  done
  ((k8s_135 && (with_cm || with_sched))) &&
    die "start: --k8s-1.35 starts etcd and kube-apiserver only"
  local bin apiserver needed=(etcd kube-apiserver) build_cmd="scripts/controlplane.sh build" c
  bin="$(bin_dir)"
  apiserver="${bin}/kube-apiserver"
  ((with_cm)) && needed+=(kube-controller-manager)
  ((with_sched)) && needed+=(kube-scheduler)
  ((with_cm || with_sched)) && build_cmd+=" --all"
  if ((k8s_135)); then
    needed=(etcd)
    build_cmd+=" --k8s-1.35"
    apiserver="$(cmd_bin_dir --k8s-1.35)/kube-apiserver"
    [[ -x "${apiserver}" ]] || die "${apiserver} is not built; run: ${build_cmd}"
  fi
  for c in "${needed[@]}"; do
    [[ -x "${bin}/${c}" ]] || die "${c} is not built in ${bin}; run: ${build_cmd}"
  done
  command -v curl >/dev/null 2>&1 || die "curl is missing; run scripts/install-deps.sh"

  mkdir -p "${dir}"
  dir="$(cd "${dir}" && pwd)"
  [[ -f "${dir}/pids" ]] && cmd_stop "${dir}"
  rm -rf "${dir}/pki" "${dir}/etcd" "${dir}/logs" "${dir}/kubeconfig" "${dir}/env" \
    "${dir}"/*.kubeconfig
  mkdir -p "${dir}/logs"
  : >"${dir}/pids"
  trap 'rc=$?; if ((rc != 0)); then log "stopping what was started"; cmd_stop "'"${dir}"'"; fi' EXIT

  local start=${SECONDS} t0
  gen_pki "${dir}/pki"
  local pki="${dir}/pki" ports etcd_port peer_port api_port cm_port sched_port
  mapfile -t ports < <(free_ports 5)
  etcd_port="${ports[0]}" peer_port="${ports[1]}" api_port="${ports[2]}"
  cm_port="${ports[3]}" sched_port="${ports[4]}"
  local server="https://127.0.0.1:${api_port}"

  launch "${dir}" etcd "${bin}/etcd" --name chamber-test --data-dir "${dir}/etcd" \
    --listen-client-urls "http://127.0.0.1:${etcd_port}" \
    --advertise-client-urls "http://127.0.0.1:${etcd_port}" \
    --listen-peer-urls "http://127.0.0.1:${peer_port}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${peer_port}" \
    --initial-cluster "chamber-test=http://127.0.0.1:${peer_port}" \
    --unsafe-no-fsync --log-level warn
  wait_ready "${dir}" etcd "http://127.0.0.1:${etcd_port}/readyz"
  t0="$(date +%s.%N)"

  # GenericWorkload (beta, off by default) serves the upstream gang API, Workloads and PodGroups
  # in scheduling.k8s.io/v1beta1, which Chamber honours (docs/workloads/podgroup.md);
  # WorkloadWithJob (alpha) gives Jobs spec.scheduling and has the Job controller make a Workload
  # and a PodGroup for each Job and name the PodGroup on its pods. Kubernetes 1.35 knows only
  # GenericWorkload (alpha there): Workloads in scheduling.k8s.io/v1alpha1 and pods'
  # spec.workloadRef.
  local gates=(--feature-gates GenericWorkload=true,WorkloadWithJob=true)
  local runtime_config=scheduling.k8s.io/v1beta1=true
  if ((k8s_135)); then
    gates=(--feature-gates GenericWorkload=true)
    runtime_config=scheduling.k8s.io/v1alpha1=true
  fi
  # No endpoint reconciler: the API server listens on loopback, which it will not publish as
  # the `kubernetes` Service's endpoint (no pod runs here to call it).
  # ServiceAccount admission is off: pods need no "default" ServiceAccount to exist in a
  # namespace just created (no kubelet mounts tokens here). TaintNodesByCondition is off: it
  # taints every new node not-ready, and without kubelets and the node lifecycle controller
  # nothing would lift the taint. TokenRequest and service-account
  # token authentication work through the signing keys.
  launch "${dir}" kube-apiserver "${apiserver}" \
    --etcd-servers "http://127.0.0.1:${etcd_port}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${api_port}" \
    --cert-dir "${pki}" --tls-cert-file "${pki}/apiserver.crt" \
    --tls-private-key-file "${pki}/apiserver.key" --client-ca-file "${pki}/ca.crt" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "${pki}/sa.pub" \
    --service-account-signing-key-file "${pki}/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
    --allow-privileged=true --profiling=false --v=1 --endpoint-reconciler-type none \
    "${gates[@]}" --runtime-config "${runtime_config}"
  local tls=(--cacert "${pki}/ca.crt" --cert "${pki}/admin.crt" --key "${pki}/admin.key")
  wait_ready "${dir}" kube-apiserver "${server}/readyz" "${tls[@]}"
  local api_ready
  api_ready="$(awk -v a="$(date +%s.%N)" -v b="${t0}" 'BEGIN { printf "%.1f", a - b }')"
  write_kubeconfig "${dir}/kubeconfig" "${server}" "${pki}" admin

  # No kubelets: node lifecycle would taint every node unreachable, taint eviction delete pods;
  # the TTL controller only annotates every node (a write per node that nothing here reads).
  if ((with_cm)); then
    write_kubeconfig "${dir}/controller-manager.kubeconfig" "${server}" "${pki}" \
      controller-manager
    launch "${dir}" kube-controller-manager "${bin}/kube-controller-manager" \
      --kubeconfig "${dir}/controller-manager.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port "${cm_port}" --cert-dir "${pki}/controller-manager" \
      --use-service-account-credentials=true \
      --service-account-private-key-file "${pki}/sa.key" --root-ca-file "${pki}/ca.crt" \
      --service-cluster-ip-range 10.0.0.0/24 \
      --controllers '*,-node-lifecycle-controller,-taint-eviction-controller,-ttl-controller' \
      --leader-elect=false --profiling=false --v=1 "${gates[@]}"
  fi
  if ((with_sched)); then
    write_kubeconfig "${dir}/scheduler.kubeconfig" "${server}" "${pki}" scheduler
    launch "${dir}" kube-scheduler "${bin}/kube-scheduler" \
      --kubeconfig "${dir}/scheduler.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port "${sched_port}" --cert-dir "${pki}/scheduler" \
      --leader-elect=false --profiling=false --v=1 "${gates[@]}"
  fi
  ((with_cm)) && wait_ready "${dir}" kube-controller-manager \
    "https://127.0.0.1:${cm_port}/healthz" -k
  ((with_sched)) && wait_ready "${dir}" kube-scheduler "https://127.0.0.1:${sched_port}/healthz" -k

  local tools kubectl="" helm=""
  if tools="$("${root}/scripts/kube-tools.sh" path)"; then
    kubectl="${tools}/kubectl" helm="${tools}/helm"
  fi
  {
    printf 'export KUBECONFIG=%q\n' "${dir}/kubeconfig"
    printf 'export CHAMBER_TEST_KUBECONFIG=%q\n' "${dir}/kubeconfig"
    printf 'export CHAMBER_TEST_CONTROLPLANE_DIR=%q\n' "${dir}"
    printf 'export CHAMBER_APISERVER_URL=%q\n' "${server}"
    printf 'export CHAMBER_ETCD_URL=%q\n' "http://127.0.0.1:${etcd_port}"
    if [[ -n "${kubectl}" ]]; then
      printf 'export CHAMBER_KUBECTL=%q\n' "${kubectl}"
      printf 'export CHAMBER_HELM=%q\n' "${helm}"
    fi
  } >"${dir}/env"
  trap - EXIT
  log "kube-apiserver ready at ${server} ${api_ready}s after launch; all ready in" \
    "$((SECONDS - start))s"
  log "kubeconfig: ${dir}/kubeconfig (source ${dir}/env)"
}

cmd_stop() {
  [[ $# -eq 1 ]] || die "stop: expected <dir>"
  local dir="$1" grace="${CHAMBER_CONTROLPLANE_STOP_GRACE:-5}"
  [[ -f "${dir}/pids" ]] || return 0
  local -a names pids binaries
  local name pid binary i
  while read -r name pid binary; do
    names+=("${name}") pids+=("${pid}") binaries+=("${binary}")
  done <"${dir}/pids"
  # Reverse start order: the apiserver's clients first, etcd last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    alive "${pids[i]}" "${binaries[i]}" || continue
    kill -TERM "${pids[i]}" 2>/dev/null || true
    local deadline=$((SECONDS + grace))
    while alive "${pids[i]}" "${binaries[i]}" && ((SECONDS < deadline)); do sleep 0.1; done
    if alive "${pids[i]}" "${binaries[i]}"; then
      log "${names[i]} (pid ${pids[i]}) ignored TERM for ${grace}s; killing it"
      kill -KILL "${pids[i]}" 2>/dev/null || true
    fi
    log "stopped ${names[i]} (pid ${pids[i]})"
  done
  rm -f "${dir}/pids"
}

cmd_status() {
  [[ $# -eq 1 ]] || die "status: expected <dir>"
  local dir="$1" ok=0 name pid binary
  if [[ ! -f "${dir}/pids" ]]; then
    echo "not running (no ${dir}/pids)"
    return 3
  fi
  while read -r name pid binary; do
    if alive "${pid}" "${binary}"; then
      printf '%-24s running (pid %s)\n' "${name}" "${pid}"
    else
      printf '%-24s stopped\n' "${name}"
      ok=3
    fi
  done <"${dir}/pids"
  local server
  server="$(awk '$1 == "server:" { print $2; exit }' "${dir}/kubeconfig" 2>/dev/null)"
  if [[ -n "${server}" ]] && [[ "$(curl -s --max-time 2 --cacert "${dir}/pki/ca.crt" \
    --cert "${dir}/pki/admin.crt" --key "${dir}/pki/admin.key" "${server}/readyz")" == "ok" ]]; then
    printf '%-24s %s\n' "apiserver /readyz" "ok (${server})"
  else
    printf '%-24s %s\n' "apiserver /readyz" "not ready"
    ok=3
  fi
  return "${ok}"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  bin-dir) shift && cmd_bin_dir "$@" ;;
  start) shift && cmd_start "$@" ;;
  stop) shift && cmd_stop "$@" ;;
  status) shift && cmd_status "$@" ;;
  -h | --help | help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" ;;
  *) die "usage: scripts/controlplane.sh build|bin-dir|start|stop|status (see --help)" ;;
esac
