#!/usr/bin/env bash
# Installs everything needed to build and test Chamber. Safe to run repeatedly: each group
# checks what is already present and installs only what is missing.
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
  libsqlite3-dev
  googletest
  libgtest-dev
  libgmock-dev
  librapidcheck-dev
  libbenchmark-dev
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

install_debian_packages() {
  local missing=() pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    debian_package_installed "${pkg}" || missing+=("${pkg}")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "Debian packages: all ${#DEBIAN_PACKAGES[@]} present"
    return 0
  fi
  log "Debian packages: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
}

# One function per group of dependencies (Debian packages, Go modules, npm packages, ...);
# main runs them in order.
main() {
  install_debian_packages
}

main "$@"
