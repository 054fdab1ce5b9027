#!/usr/bin/env bash
# Formats Chamber's C++ sources under src/ with clang-format 14, in place.
#   scripts/format.sh           format every file
#   scripts/format.sh --check   change nothing; fail and list the files that need formatting
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *)
    echo "usage: scripts/format.sh [--check]" >&2
    exit 2
    ;;
esac

clang_format=""
for candidate in clang-format-14 clang-format; do
  if command -v "${candidate}" >/dev/null 2>&1; then
    clang_format="${candidate}"
    break
  fi
done
if [[ -z "${clang_format}" ]]; then
  echo "format.sh: clang-format 14 not found; run scripts/install-deps.sh" >&2
  exit 1
fi

# Tracked and new files, skipping whatever .gitignore excludes (build trees); outside a git
# checkout, every matching file under src/.
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do
    [[ -f "${f}" ]] && files+=("${f}")
  done < <(git ls-files -z --cached --others --exclude-standard -- \
    'src/*.h' 'src/*.cc' 'src/*.cpp')
else
  while IFS= read -r -d '' f; do
    files+=("${f}")
  done < <(find src \( -name '*.h' -o -name '*.cc' -o -name '*.cpp' \) -print0)
fi
if [[ ${#files[@]} -eq 0 ]]; then
  exit 0
fi

if "${check}"; then
  if ! "${clang_format}" --dry-run -Werror "${files[@]}"; then
    echo "format.sh: files above are not formatted; run scripts/format.sh" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files formatted correctly"
else
  "${clang_format}" -i "${files[@]}"
fi
