#!/usr/bin/env bash
# The real workload controllers that integration tests run against the test control plane
# (scripts/controlplane.sh): today the JobSet controller, built from the Go module in
# tools/workloadcontrollers, with the CRD of the same release beside it.
#
# Usage:
#   scripts/workload-controllers.sh build
#       Build jobset-controller into the cache and copy the JobSet CRD next to it, unless both
#       are there for this exact module already; print the bin dir.
#   scripts/workload-controllers.sh bin-dir
#       Print the bin dir for the pinned module (built or not). It holds:
#         jobset-controller                      run: jobset-controller --kubeconfig <file>
#         crds/jobset.x-k8s.io_jobsets.yaml      the CRD to apply before starting it
#
# Environment:
#   CHAMBER_WORKLOAD_CONTROLLERS_CACHE  cache root (default:
#                                       ~/.cache/chamber/workload-controllers, or under
#                                       $XDG_CACHE_HOME when set)
#   CHAMBER_WORKLOAD_CONTROLLERS_BIN    use the files in this directory instead of the cache
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly root
readonly module_dir="${root}/tools/workloadcontrollers"
readonly crd_path="config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"

log() { printf 'workload-controllers: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The pinned JobSet release, as go.mod requires it (e.g. v0.8.2).
jobset_version() {
  awk '($1 == "sigs.k8s.io/jobset" && $2 ~ /^v/) { print $2; exit }
       ($1 == "require" && $2 == "sigs.k8s.io/jobset") { print $3; exit }' \
    "${module_dir}/go.mod"
}

# The cache key: the release plus a hash of everything that decides the bin dir's content.
module_hash() {
  (cd "${module_dir}" && cat go.mod go.sum cmd/*/*.go && declare -f cmd_build) |
    sha256sum | cut -c1-12
}

bin_dir() {
  if [[ -n "${CHAMBER_WORKLOAD_CONTROLLERS_BIN:-}" ]]; then
    printf '%s\n' "${CHAMBER_WORKLOAD_CONTROLLERS_BIN}"
    return
  fi
  local cache="${XDG_CACHE_HOME:-${HOME}/.cache}/chamber/workload-controllers"
  cache="${CHAMBER_WORKLOAD_CONTROLLERS_CACHE:-${cache}}"
  printf '%s/jobset-%s-%s/bin\n' "${cache}" "$(jobset_version)" "$(module_hash)"
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
    die "Go ${have} is older than ${want}, which tools/workloadcontrollers/go.mod needs"
}

cmd_build() {
  [[ $# -eq 0 ]] || die "build: takes no options"
  local dir
  dir="$(bin_dir)"
  if [[ -x "${dir}/jobset-controller" && -f "${dir}/crds/${crd_path##*/}" ]]; then
    log "up to date in ${dir}"
    printf '%s\n' "${dir}"
    return 0
  fi
  check_go
  local version
  version="$(jobset_version)"
  log "building jobset-controller (sigs.k8s.io/jobset ${version}) into ${dir}"
  mkdir -p "${dir}"
  local tmp start=${SECONDS}
  tmp="$(mktemp -d "${dir}/.build.XXXXXX")"
  # -mod=readonly with the committed go.sum: the same sources on every machine. nice: the C++
  # build often runs beside it.
  if ! (cd "${module_dir}" && nice go build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "-s -w -X 'sigs.k8s.io/jobset/pkg/version.GitVersion=${version}'" \
    -o "${tmp}/" ./cmd/jobset-controller); then
    rm -rf "${tmp}"
    die "go build failed"
  fi
  # The CRD from the same module version the controller was built from.
  local src
  if ! src="$(cd "${module_dir}" &&
    go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/jobset)" || [[ -z "${src}" ]]; then
    rm -rf "${tmp}"
    die "cannot locate sigs.k8s.io/jobset in the module cache"
  fi
  mkdir -p "${tmp}/crds"
  cp "${src}/${crd_path}" "${tmp}/crds/"
  chmod 0644 "${tmp}/crds/${crd_path##*/}"
  rm -rf "${dir}/crds"
  mv "${tmp}/crds" "${dir}/crds"
  mv "${tmp}/jobset-controller" "${dir}/jobset-controller"
  rmdir "${tmp}"
  log "built jobset-controller in $((SECONDS - start))s"
  printf '%s\n' "${dir}"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  bin-dir) bin_dir ;;
  -h | --help | help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" ;;
  *) die "usage: scripts/workload-controllers.sh build|bin-dir (see --help)" ;;
esac
