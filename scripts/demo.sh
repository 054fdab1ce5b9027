#!/usr/bin/env bash
# Installs what is missing, builds the release preset and runs Chamber on its built-in example.
# Extra arguments go to `chamber schedule --example`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# ccache keys on compiler arguments, which hold absolute paths: relative to the checkout, a
# fresh clone in another folder (as CI makes) reuses what an earlier build compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/src/cli/chamber schedule --example "$@"
