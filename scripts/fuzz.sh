#!/usr/bin/env bash
# Builds the libFuzzer harnesses (the `fuzz` preset: clang, ASan + UBSan) and runs each for a
# while over a copy of its seed corpus (docs/reliability.md, "Hostile input"). Prints per
# harness the executions, executions per second and new inputs found; fails when any harness
# crashes, hangs, leaks or breaks a property, and keeps the input that did it.
#
# Usage: scripts/fuzz.sh [--seconds N] [--runs N] [--seed N] [--no-build] [harness...]
#   --seconds N   how long each harness runs (default 20); the long run is --seconds 3600
#   --runs N      stop each harness after N inputs instead (--seconds then only caps it)
#   --seed N      libFuzzer's random seed (default: a new one each run); with --runs, a run
#                 that does not hit the cap tries the same inputs every time
#   --no-build    run what build/fuzz holds
#   harness...    only these (names as in build/fuzz/fuzzers.txt); default all
#
# Each run works in build/fuzz/runs/<harness>/: corpus/ (the seeds, then what the run added),
# log, and any finding as crash-*, leak-*, timeout-* or oom-*. To keep new inputs, merge them
# into the seeds: build/fuzz/.../fuzz_<harness> -merge=1 <seed dir> build/fuzz/runs/<harness>/corpus
#
# Environment: CMAKE_BUILD_PARALLEL_LEVEL (compile jobs, default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=20
max_runs=""
seed=""
build=1
only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds)
      seconds="${2:?--seconds needs a number}"
      [[ "${seconds}" =~ ^[0-9]+$ && "${seconds}" -gt 0 ]] ||
        { echo "fuzz.sh: --seconds takes a positive whole number, not '${seconds}'" >&2; exit 2; }
      shift 2
      ;;
    --runs | --seed)
      [[ "${2:-}" =~ ^[0-9]+$ && "${2}" -gt 0 ]] ||
        { echo "fuzz.sh: $1 takes a positive whole number, not '${2:-}'" >&2; exit 2; }
      if [[ "$1" == --runs ]]; then max_runs="$2"; else seed="$2"; fi
      shift 2
      ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) only+=("$1"); shift ;;
  esac
done

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
manifest=build/fuzz/fuzzers.txt

if [[ ${build} -eq 1 ]]; then
  cmake --preset fuzz >/dev/null
  if [[ ${#only[@]} -eq 0 ]]; then
    cmake --build --preset fuzz
  else
    cmake --build build/fuzz --target "${only[@]/#/fuzz_}"
  fi
fi
[[ -f "${manifest}" ]] || { echo "fuzz.sh: ${manifest} is missing: build first" >&2; exit 1; }

declare -A binary corpus
names=()
while read -r name bin dir; do
  binary[${name}]="${bin}"
  corpus[${name}]="${dir}"
  names+=("${name}")
done <"${manifest}"
if [[ ${#only[@]} -gt 0 ]]; then
  for name in "${only[@]}"; do
    [[ -n "${binary[${name}]:-}" ]] ||
      { echo "fuzz.sh: no harness '${name}' (see ${manifest})" >&2; exit 2; }
  done
  names=("${only[@]}")
fi

# The sanitizers stop at the first report; libFuzzer saves the input that caused it.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=()
total_runs=0
printf '%-22s %12s %10s %8s  %s\n' harness executions exec/s new result
for name in "${names[@]}"; do
  run="build/fuzz/runs/${name}"
  rm -rf "${run}"
  mkdir -p "${run}/corpus"
  cp -R "${corpus[${name}]}/." "${run}/corpus/"
  rc=0
  # -timeout: one input running this long is a hang; -rss_limit_mb: a parser that allocates
  # without bound is a finding too.
  "${binary[${name}]}" -max_total_time="${seconds}" ${max_runs:+-runs="${max_runs}"} \
    ${seed:+-seed="${seed}"} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="${run}/" "${run}/corpus" >"${run}/log" 2>&1 || rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "${run}/log" | tail -n 1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "${run}/log" | tail -n 1)"
  added="$(sed -n 's/^stat::new_units_added: *//p' "${run}/log" | tail -n 1)"
  total_runs=$((total_runs + ${runs:-0}))
  result=ok
  if [[ ${rc} -ne 0 ]]; then
    finding="$(find "${run}" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
      -name 'timeout-*' -o -name 'oom-*' \) | head -n 1)"
    result="FAILED (exit ${rc})${finding:+: ${finding}}"
    failed+=("${name}")
  fi
  printf '%-22s %12s %10s %8s  %s\n' "${name}" "${runs:-?}" "${speed:-?}" "${added:-?}" "${result}"
  if [[ ${rc} -ne 0 ]]; then
    # The sanitizer's or the property's report.
    grep -a -m 1 -B 2 -A 25 -E '^==[0-9]+==ERROR|runtime error|fuzz property failed|ERROR: libFuzzer' \
      "${run}/log" | sed 's/^/    /' || tail -n 30 "${run}/log" | sed 's/^/    /'
  fi
done
if [[ -n "${max_runs}" ]]; then
  limit="${max_runs} inputs each (at most ${seconds} s)"
else
  limit="${seconds} s each"
fi
printf '%d harnesses, %s%s, %d executions in all\n' "${#names[@]}" "${limit}" \
  "${seed:+, seed ${seed}}" "${total_runs}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs and logs under build/fuzz/runs/)" >&2
  exit 1
fi
