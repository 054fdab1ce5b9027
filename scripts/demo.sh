#!/usr/bin/env bash
# Installs what is missing, builds the release preset and runs `chamber demo`: Chamber on a
# simulated cluster, with the dashboard on http://127.0.0.1:8080. Extra arguments go to
# `chamber demo` (for example --port 9000 or --speed 600).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# ccache keys on compiler arguments, which hold absolute paths: relative to the checkout, a
# fresh clone in another folder (as CI makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"

scripts/install-deps.sh --for build
cmake --preset release >/dev/null
# Only the chamber binary: the first dashboard should not wait for every test to compile.
cmake --build --preset release --target chamber
exec build/release/src/cli/chamber demo "$@"
