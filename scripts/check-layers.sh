#!/usr/bin/env bash
# The dependency rules of docs/architecture.md, checked against the build's own target graph: no
# library may reach, directly or through another, a library its layer must not know. Configures a
# scratch build directory (seconds; nothing is compiled) with CMake's --graphviz output, whose
# per-target files list every library a target reaches.
#
#   scripts/check-layers.sh            # check
#   scripts/check-layers.sh --graph F  # also keep the whole graph as F (Graphviz dot)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
graph_out=""
if [[ "${1:-}" == "--graph" ]]; then
  graph_out="${2:?--graph needs a file}"
fi

scratch="$(mktemp -d)"
trap 'rm -rf "${scratch}"' EXIT
if ! cmake -S "${root}" -B "${scratch}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  --graphviz="${scratch}/graph/deps.dot" >"${scratch}/configure.log" 2>&1; then
  cat "${scratch}/configure.log" >&2
  echo "check-layers: configuring failed" >&2
  exit 1
fi
[[ -n "${graph_out}" ]] && cp "${scratch}/graph/deps.dot" "${graph_out}"

# library: the libraries it must not reach
rules=(
  "chamber_common: chamber_core chamber_kube chamber_daemon chamber_sim chamber_fleet"
  "chamber_core: chamber_kube chamber_daemon chamber_sim chamber_fleet chamber_core_io"
  "chamber_kube: chamber_core chamber_core_io chamber_daemon chamber_sim chamber_fleet"
  "chamber_fleet: chamber_core chamber_kube chamber_daemon chamber_sim"
  "chamber_daemon: chamber_sim chamber_kube chamber_sim_backend chamber_kube_backend chamber_health_controller"
  "chamber_health_controller: chamber_core chamber_kube chamber_daemon chamber_sim"
  "chamber_kube_backend: chamber_sim chamber_sim_backend chamber_health_controller"
  "chamber_sim_backend: chamber_kube chamber_kube_backend"
  "chamber_admission: chamber_core chamber_daemon chamber_sim chamber_fleet chamber_kube_backend"
  "chamber_chamberd: chamber_sim chamber_sim_backend"
)

failures=0
for rule in "${rules[@]}"; do
  lib="${rule%%:*}"
  file="${scratch}/graph/deps.dot.${lib}"
  if [[ ! -f "${file}" ]]; then
    echo "check-layers: no target ${lib} in the build (rename the rule?)" >&2
    failures=$((failures + 1))
    continue
  fi
  for forbidden in ${rule#*:}; do
    if grep -q "label = \"${forbidden}\"" "${file}"; then
      echo "check-layers: ${lib} reaches ${forbidden}; see docs/architecture.md" >&2
      failures=$((failures + 1))
    fi
  done
done
if ((failures > 0)); then
  exit 1
fi
echo "check-layers: ${#rules[@]} libraries keep to their layers"
