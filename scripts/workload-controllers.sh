#!/usr/bin/env bash
# The real workload controllers that integration tests run against the test control plane
# (scripts/controlplane.sh), each built from its upstream Go module in its own module directory
# under tools/workloadcontrollers (their k8s.io and controller-runtime versions differ), with
# the CRDs of the same releases beside them:
#   jobset-controller   sigs.k8s.io/jobset                          tools/workloadcontrollers
#   training-operator   github.com/kubeflow/training-operator       .../trainingoperator
#   kuberay-operator    github.com/ray-project/kuberay/ray-operator .../kuberay
#   lws-controller      sigs.k8s.io/lws                             .../lws
#   trainer-controller  github.com/kubeflow/trainer/v2              .../trainer
#   cert-manager        github.com/cert-manager/cert-manager        .../certmanager
# (cert-manager is no workload controller: its controllers and CA injector in one binary, for the
# chart test of the admission webhook's certificate, deploy/helm/test/chart_test.sh.)
#
# Usage:
#   scripts/workload-controllers.sh build
#       Build the six binaries into the cache and copy their CRDs next to them, unless all
#       are there for these exact modules already; print the bin dir.
#   scripts/workload-controllers.sh bin-dir
#       Print the bin dir for the pinned modules (built or not). It holds:
#         jobset-controller        run: jobset-controller --kubeconfig <file>
#         training-operator        run: training-operator --kubeconfig <file> [--enable-scheme <kind>]...
#         kuberay-operator         run: kuberay-operator --kubeconfig <file>
#         lws-controller           run: lws-controller --kubeconfig <file>
#         trainer-controller       run: trainer-controller --kubeconfig <file> (needs the JobSet
#                                  CRD, and jobset-controller running to make the Jobs)
#         cert-manager             run: cert-manager --kubeconfig <file>
#         crds/jobset.x-k8s.io_jobsets.yaml
#         crds/kubeflow.org_{pytorchjobs,tfjobs,mpijobs,xgboostjobs,paddlejobs,mxjobs}.yaml
#         crds/ray.io_{rayclusters,rayjobs}.yaml
#         crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml
#         crds/trainer.kubeflow.org_{trainjobs,trainingruntimes,clustertrainingruntimes}.yaml
#         crds/cert-manager.io_{certificates,certificaterequests,issuers,clusterissuers}.yaml
#       (the CRDs to apply before starting the controller that reconciles them).
#
# Environment:
#   CHAMBER_WORKLOAD_CONTROLLERS_CACHE  cache root (default:
#                                       ~/.cache/chamber/workload-controllers, or under
#                                       $XDG_CACHE_HOME when set)
#   CHAMBER_WORKLOAD_CONTROLLERS_BIN    use the files in this directory instead of the cache
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly root
readonly modules_dir="${root}/tools/workloadcontrollers"

# One line per controller: binary, module directory (under tools/workloadcontrollers), upstream
# module path, -ldflags -X of the version ("" for none; @V@ stands for the version), and the
# CRDs (paths inside the upstream module).
readonly controllers=(
  "jobset-controller|.|sigs.k8s.io/jobset|sigs.k8s.io/jobset/pkg/version.GitVersion=@V@|config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
  "training-operator|trainingoperator|github.com/kubeflow/training-operator||manifests/base/crds/kubeflow.org_pytorchjobs.yaml manifests/base/crds/kubeflow.org_tfjobs.yaml manifests/base/crds/kubeflow.org_mpijobs.yaml manifests/base/crds/kubeflow.org_xgboostjobs.yaml manifests/base/crds/kubeflow.org_paddlejobs.yaml manifests/base/crds/kubeflow.org_mxjobs.yaml"
  "kuberay-operator|kuberay|github.com/ray-project/kuberay/ray-operator||config/crd/bases/ray.io_rayclusters.yaml config/crd/bases/ray.io_rayjobs.yaml"
  "lws-controller|lws|sigs.k8s.io/lws|sigs.k8s.io/lws/pkg/version.GitVersion=@V@|config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
  "trainer-controller|trainer|github.com/kubeflow/trainer/v2||manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml"
  "cert-manager|certmanager|github.com/cert-manager/cert-manager|github.com/cert-manager/cert-manager/pkg/util.AppVersion=@V@|deploy/crds/cert-manager.io_certificates.yaml deploy/crds/cert-manager.io_certificaterequests.yaml deploy/crds/cert-manager.io_issuers.yaml deploy/crds/cert-manager.io_clusterissuers.yaml"
)

log() { printf 'workload-controllers: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The pinned release of <upstream module> as <module dir>/go.mod requires it (e.g. v0.8.2).
module_version() {
  awk -v m="$2" '($1 == m && $2 ~ /^v/) { print $2; exit }
       ($1 == "require" && $2 == m) { print $3; exit }' "${modules_dir}/$1/go.mod"
}

# The cache key: a hash of everything that decides the bin dir's content, over all modules.
module_hash() {
  local entry binary dir
  {
    for entry in "${controllers[@]}"; do
      IFS='|' read -r binary dir _ <<<"${entry}"
      (cd "${modules_dir}/${dir}" && cat go.mod go.sum "cmd/${binary}"/*.go)
    done
    cat "${modules_dir}/ctlmain/go.mod" "${modules_dir}/ctlmain"/*.go
    printf '%s\n' "${controllers[@]}"
    declare -f cmd_build build_one
  } | sha256sum | cut -c1-12
}

bin_dir() {
  if [[ -n "${CHAMBER_WORKLOAD_CONTROLLERS_BIN:-}" ]]; then
    printf '%s\n' "${CHAMBER_WORKLOAD_CONTROLLERS_BIN}"
    return
  fi
  local cache="${XDG_CACHE_HOME:-${HOME}/.cache}/chamber/workload-controllers"
  cache="${CHAMBER_WORKLOAD_CONTROLLERS_CACHE:-${cache}}"
  # e.g. jobset-v0.8.2-trainingoperator-v1.8.1-kuberay-v1.4.0-lws-v0.7.0-trainer-v2.0.0-
  # certmanager-v1.21.2-<hash>
  printf '%s/jobset-%s-trainingoperator-%s-kuberay-%s-lws-%s-trainer-%s-certmanager-%s-%s/bin\n' "${cache}" \
    "$(module_version . sigs.k8s.io/jobset)" \
    "$(module_version trainingoperator github.com/kubeflow/training-operator)" \
    "$(module_version kuberay github.com/ray-project/kuberay/ray-operator)" \
    "$(module_version lws sigs.k8s.io/lws)" \
    "$(module_version trainer github.com/kubeflow/trainer/v2)" \
    "$(module_version certmanager github.com/cert-manager/cert-manager)" "$(module_hash)"
}

# True when every binary and CRD is in <dir>.
complete() {
  local entry binary crds crd
  for entry in "${controllers[@]}"; do
    IFS='|' read -r binary _ _ _ crds <<<"${entry}"
    [[ -x "$1/${binary}" ]] || return 1
    for crd in ${crds}; do
      [[ -f "$1/crds/${crd##*/}" ]] || return 1
    done
  done
}

# Fails with a clear message unless a Go toolchain at least as new as each go.mod's is on PATH.
check_go() {
  [[ -x /usr/local/go/bin/go ]] && PATH="${PATH}:/usr/local/go/bin"
  command -v go >/dev/null 2>&1 ||
    die "'go' is not on PATH; install Go (scripts/install-deps.sh checks for it)"
  local entry dir want have
  have="$(go env GOVERSION)"
  have="${have#go}"
  for entry in "${controllers[@]}"; do
    IFS='|' read -r _ dir _ <<<"${entry}"
    want="$(awk '$1 == "go" { print $2; exit }' "${modules_dir}/${dir}/go.mod")"
    [[ "$(printf '%s\n%s\n' "${want}" "${have}" | sort -V | head -n 1)" == "${want}" ]] ||
      die "Go ${have} is older than ${want}, which ${modules_dir#"${root}/"}/${dir}/go.mod needs"
  done
}

# build_one <entry> <tmp dir>: builds one controller into <tmp dir> and copies its CRDs into
# <tmp dir>/crds.
build_one() {
  local binary dir upstream xflag crds
  IFS='|' read -r binary dir upstream xflag crds <<<"$1"
  local module="${modules_dir}/${dir}" version start=${SECONDS}
  version="$(module_version "${dir}" "${upstream}")"
  log "building ${binary} (${upstream} ${version})"
  local ldflags="-s -w"
  [[ -z "${xflag}" ]] || ldflags+=" -X '${xflag//@V@/${version}}'"
  # -mod=readonly with the committed go.sum: the same sources on every machine. nice: the C++
  # build often runs beside it.
  (cd "${module}" && nice go build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "${ldflags}" -o "$2/" "./cmd/${binary}") || return 1
  # The CRDs from the same module version the controller was built from.
  local src crd
  src="$(cd "${module}" && go list -mod=readonly -m -f '{{.Dir}}' "${upstream}")" &&
    [[ -n "${src}" ]] || {
    log "error: cannot locate ${upstream} in the module cache"
    return 1
  }
  mkdir -p "$2/crds"
  for crd in ${crds}; do
    cp "${src}/${crd}" "$2/crds/" && chmod 0644 "$2/crds/${crd##*/}" || return 1
  done
  log "built ${binary} in $((SECONDS - start))s"
}

cmd_build() {
  [[ $# -eq 0 ]] || die "build: takes no options"
  local dir
  dir="$(bin_dir)"
  if complete "${dir}"; then
    log "up to date in ${dir}"
    printf '%s\n' "${dir}"
    return 0
  fi
  check_go
  log "building the workload controllers into ${dir}"
  mkdir -p "${dir}"
  local tmp entry binary start=${SECONDS}
  tmp="$(mktemp -d "${dir}/.build.XXXXXX")"
  for entry in "${controllers[@]}"; do
    if ! build_one "${entry}" "${tmp}"; then
      rm -rf "${tmp}"
      die "building ${entry%%|*} failed"
    fi
  done
  # Only a complete set replaces what is there.
  rm -rf "${dir}/crds"
  mv "${tmp}/crds" "${dir}/crds"
  for entry in "${controllers[@]}"; do
    binary="${entry%%|*}"
    mv "${tmp}/${binary}" "${dir}/${binary}"
  done
  rmdir "${tmp}"
  log "built the workload controllers in $((SECONDS - start))s"
  printf '%s\n' "${dir}"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  bin-dir) bin_dir ;;
  -h | --help | help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" ;;
  *) die "usage: scripts/workload-controllers.sh build|bin-dir (see --help)" ;;
esac
