#!/usr/bin/env bash
# Runs clang-tidy 14 (checks in .clang-tidy) over Chamber's sources, using the compile commands
# of the release preset. Slow, so not part of scripts/test.sh; run it before sending a change.
#   scripts/tidy.sh                 every .cc file under src/
#   scripts/tidy.sh FILE...         only these files
#   TIDY_JOBS=4 scripts/tidy.sh     parallel clang-tidy processes (default 2)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=build/release
if [[ ! -f "${build_dir}/compile_commands.json" ]]; then
  echo "tidy.sh: ${build_dir}/compile_commands.json missing; run: cmake --preset release" >&2
  exit 1
fi

clang_tidy=""
for candidate in clang-tidy-14 clang-tidy; do
  if command -v "${candidate}" >/dev/null 2>&1; then
    clang_tidy="${candidate}"
    break
  fi
done
if [[ -z "${clang_tidy}" ]]; then
  echo "tidy.sh: clang-tidy 14 not found; run scripts/install-deps.sh" >&2
  exit 1
fi

files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then
  while IFS= read -r -d '' f; do
    [[ -f "${f}" ]] && files+=("${f}")
  done < <(git ls-files -z --cached --others --exclude-standard -- 'src/*.cc' 'src/*.cpp')
fi
if [[ ${#files[@]} -eq 0 ]]; then
  exit 0
fi

# Generated sources (version.h) must exist before clang-tidy parses anything.
cmake --build "${build_dir}" --target chamber_common >/dev/null

# The compile commands come from GCC; clang must not fail on GCC-only warning flags.
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "${TIDY_JOBS:-2}" "${clang_tidy}" -p "${build_dir}" --quiet \
    --warnings-as-errors='*' --extra-arg=-Wno-unknown-warning-option
