#!/usr/bin/env bash
# Checks the images of deploy/docker (docs/install.md, "Building the images") against the built
# binaries.
#
# Usage: scripts/check-images.sh [static|build]
#   static  (default) every shared library that chamberd and chamber-agent load (ldd, on
#           stripped copies, as the images hold them) comes from a Debian package that the
#           runtime stage installs: one its apt-get install line names (parsed from the
#           Dockerfile's last stage), a dependency of those, or part of debian:bookworm-slim
#           (Essential or priority required, and apt with its dependencies). NVML is not
#           linked: the agent dlopens it. Every file of the dashboard bundle is inside chamberd,
#           byte for byte. Needs a Debian machine of the runtime stage's release (dpkg, apt-cache,
#           ldd); elsewhere it says so and exits 77 (skipped).
#   build   builds both images with buildah (chroot isolation, its own storage in a temporary
#           folder) from a Debian base image made here by mmdebstrap from this machine's apt
#           sources (nothing from Docker Hub), then runs `--version` inside each. Needs root,
#           buildah, mmdebstrap and the network for apt and npm inside the build stage; without
#           them it says what is missing and exits 77 (skipped).
#
# Environment:
#   CHAMBER_CHAMBERD   chamberd binary (default build/release/src/chamberd/chamberd)
#   CHAMBER_AGENT      chamber-agent binary (default build/release/src/agent/chamber-agent)
#   CHAMBER_WEB_DIST   the dashboard bundle chamberd embeds (default build/release/web/dist)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

chamberd="${CHAMBER_CHAMBERD:-build/release/src/chamberd/chamberd}"
agent="${CHAMBER_AGENT:-build/release/src/agent/chamber-agent}"
web_dist="${CHAMBER_WEB_DIST:-build/release/web/dist}"
chamberd_dockerfile=deploy/docker/chamberd.Dockerfile
agent_dockerfile=deploy/docker/agent.Dockerfile

readonly skipped=77
failures=0
log() { printf 'check-images: %s\n' "$*"; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}
skip() {
  log "skipped: $*"
  exit "${skipped}"
}

# runtime_stage <Dockerfile>: "base <image>" for the last FROM, then "package <name>" for every
# package an `apt-get install` of that stage names. Continuation lines are joined and comment
# lines dropped, as Docker does.
runtime_stage() {
  awk '
    /^[[:space:]]*#/ { next }
    { logical = logical $0 }
    logical ~ /\\[[:space:]]*$/ { sub(/\\[[:space:]]*$/, " ", logical); next }
    { lines[++n] = logical; logical = "" }
    END {
      for (i = 1; i <= n; i++) if (toupper(lines[i]) ~ /^[[:space:]]*FROM[[:space:]]/) last = i
      if (!last) exit
      split(lines[last], from)
      print "base", from[2]
      for (i = last + 1; i <= n; i++) {
        installing = 0
        count = split(lines[i], w)
        for (j = 1; j <= count; j++) {
          if (w[j] == "apt-get" && w[j + 1] == "install") { installing = 1; j++; continue }
          if (!installing) continue
          if (w[j] == "&&" || w[j] == "||" || w[j] == ";") { installing = 0; continue }
          if (w[j] !~ /^-/) { sub(/=.*/, "", w[j]); print "package", w[j] }
        }
      }
    }' "$1"
}

# dependency_closure <package>...: the packages and their Depends and Pre-Depends, recursively,
# one a line (alternatives and virtual packages included).
dependency_closure() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" 2>/dev/null |
    awk '/^[^ ]/ { gsub(/[<>]/, ""); sub(/:.*/, ""); print }' | sort -u
}

# base_image_packages: what debian:bookworm-slim holds. The image is a minbase bootstrap:
# Essential and priority-required packages, apt, and their dependencies. Read from this
# machine's dpkg database, so it can only be smaller than the image's.
base_image_packages() {
  local required
  mapfile -t required < <(dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' |
    awk '$2 == "yes" || $3 == "required" { print $1 }')
  dependency_closure apt "${required[@]}"
}

# candidate_paths <path>: where dpkg may list a library: the path ldd gave and its target, each
# with and without the /usr prefix (merged /usr: ldd says /lib/..., the package /usr/lib/...).
candidate_paths() {
  local path
  for path in "$1" "$(readlink -f "$1")"; do
    printf '%s\n' "${path}" "/usr${path}" "${path#/usr}"
  done
}

# check_libraries <binary> <name> <Dockerfile>
check_libraries() {
  local binary="$1" name="$2" dockerfile="$3"
  local base="" listed=() line kind value
  while read -r kind value; do
    case "${kind}" in
      base) base="${value}" ;;
      package) listed+=("${value}") ;;
    esac
  done < <(runtime_stage "${dockerfile}")
  if [[ -z "${base}" || ${#listed[@]} -eq 0 ]]; then
    fail "${dockerfile}: no apt-get install found in the runtime stage (the last FROM)"
    return
  fi

  local have_lists=false pkg
  compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null && have_lists=true
  for pkg in "${listed[@]}"; do
    if ! apt-cache show --no-all-versions "${pkg}" >/dev/null 2>&1; then
      if ${have_lists}; then
        fail "${dockerfile}: the runtime stage installs '${pkg}', which Debian ${codename} does not have"
      else
        log "${dockerfile}: '${pkg}' is unknown to apt here (no package lists: apt-get update)"
      fi
    fi
  done

  local -A in_list=() in_closure=()
  for pkg in "${listed[@]}"; do in_list["${pkg}"]=1; done
  while read -r pkg; do in_closure["${pkg}"]=1; done < <(dependency_closure "${listed[@]}")

  # ldd: "name => path (address)", "path (address)", or "name => not found".
  local libraries=() ldd_out
  if ! ldd_out="$(ldd "${binary}" 2>&1)"; then
    fail "${name}: ldd failed: ${ldd_out}"
    return
  fi
  while read -r line; do
    if [[ "${line}" == *"=> not found"* ]]; then
      fail "${name}: ${line%% *} is not found on this machine"
    elif [[ "${line}" =~ (/[^ ]+)\ \(0x ]]; then
      libraries+=("${BASH_REMATCH[1]}")
    fi
  done <<<"${ldd_out}"

  # One dpkg -S for every candidate path: "package[:arch][, package...]: path".
  local library candidate owner from_list=0 from_deps=0 from_base=0 candidates=()
  local -A owner_of=() seen=()
  for library in "${libraries[@]}"; do
    mapfile -t -O "${#candidates[@]}" candidates < <(candidate_paths "${library}")
  done
  while IFS= read -r line; do
    [[ "${line}" == diversion* ]] && continue
    owner="${line%%: *}"
    owner_of["${line#*: }"]="${owner%%[:,]*}"
  done < <(dpkg -S "${candidates[@]}" 2>/dev/null || true)

  for library in "${libraries[@]}"; do
    owner=""
    while read -r candidate; do
      owner="${owner_of[${candidate}]:-}"
      [[ -n "${owner}" ]] && break
    done < <(candidate_paths "${library}")
    if [[ -z "${owner}" ]]; then
      fail "${name} loads ${library}, which no Debian package installed: the image cannot have it"
      continue
    fi
    [[ -n "${seen[${owner}]:-}" ]] && continue
    seen["${owner}"]=1
    if [[ -n "${in_list[${owner}]:-}" ]]; then
      from_list=$((from_list + 1))
    elif [[ -n "${in_closure[${owner}]:-}" ]]; then
      from_deps=$((from_deps + 1))
    elif [[ -n "${base_packages[${owner}]:-}" ]]; then
      from_base=$((from_base + 1))
    else
      fail "${name} loads ${library} (package ${owner}), which the runtime stage of" \
        "${dockerfile} does not install: add ${owner} to its apt-get install list"
    fi
  done
  log "${name}: ${#libraries[@]} libraries from ${#seen[@]} packages: ${from_list} listed in" \
    "${dockerfile}, ${from_deps} their dependencies, ${from_base} in ${base}"
}

# check_nvml_dlopen <agent>: NVML comes from the host driver at run time (--nvml-library), so
# the agent must start on a node without it: not a DT_NEEDED entry, loaded with dlopen.
check_nvml_dlopen() {
  local binary="$1"
  if readelf -d "${binary}" | grep -q 'NEEDED.*libnvidia-ml'; then
    fail "chamber-agent links libnvidia-ml (DT_NEEDED); it must dlopen NVML at run time"
  fi
  if ! readelf --dyn-syms -W "${binary}" | awk '$8 ~ /^dlopen(@|$)/ { found = 1 } END { exit !found }'; then
    fail "chamber-agent does not call dlopen, so it cannot load NVML from the host driver"
  fi
  if ! grep -q -a -F 'libnvidia-ml.so.1' "${binary}"; then
    fail "chamber-agent does not name libnvidia-ml.so.1, its default NVML library"
  fi
  log "chamber-agent: NVML is loaded with dlopen, not linked"
}

# check_dashboard <chamberd>: every file of the bundle, byte for byte, and its path, are in the
# binary (web/cmake/embed_assets.cmake compiles them in as string literals).
check_dashboard() {
  local binary="$1"
  if [[ ! -f "${web_dist}/index.html" ]]; then
    fail "no dashboard bundle at ${web_dist} (CHAMBER_WEB_DIST): build chamberd first"
    return
  fi
  local out
  if ! out="$(python3 - "${binary}" "${web_dist}" <<'EOF'
import pathlib
import sys

binary = pathlib.Path(sys.argv[1]).read_bytes()
dist = pathlib.Path(sys.argv[2])
files = sorted(p for p in dist.rglob("*") if p.is_file())
index = (dist / "index.html").read_text()
missing = 0
for path in files:
    name = "/" + path.relative_to(dist).as_posix()
    if path.read_bytes() not in binary:
        print(f"chamberd does not hold the dashboard's {name} ({path})")
        missing += 1
    if name.encode() not in binary:
        print(f"chamberd's asset table has no path {name}")
        missing += 1
    if name != "/index.html" and name not in index:
        print(f"the bundle's index.html does not load {name}")
        missing += 1
if missing:
    sys.exit(1)
print(f"{len(files)} files: " + ", ".join("/" + p.relative_to(dist).as_posix() for p in files))
EOF
  )"; then
    while read -r line; do fail "${line}"; done <<<"${out}"
    return
  fi
  log "chamberd embeds the dashboard bundle of ${web_dist}: ${out}"
}

static_checks() {
  local tool
  for tool in dpkg dpkg-query apt-cache ldd readelf strip python3; do
    command -v "${tool}" >/dev/null 2>&1 || skip "'${tool}' is not installed (a Debian machine is needed)"
  done
  local binary
  for binary in "${chamberd}" "${agent}"; do
    [[ -x "${binary}" ]] ||
      { log "no binary ${binary}: cmake --build build/release --target chamberd chamber-agent"; exit 2; }
  done
  codename="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
  local base
  for base in $(runtime_stage "${chamberd_dockerfile}" | awk '$1 == "base" { print $2 }') \
    $(runtime_stage "${agent_dockerfile}" | awk '$1 == "base" { print $2 }'); do
    [[ "${base}" == "debian:${codename}-slim" ]] ||
      skip "the runtime stage is ${base}, this machine is '${codename:-not Debian}': package names would not match"
  done

  # The images hold stripped binaries (the Dockerfiles strip them); check the same.
  tmp="$(mktemp -d)"
  trap 'rm -rf "${tmp}"' EXIT
  strip -o "${tmp}/chamberd" "${chamberd}"
  strip -o "${tmp}/chamber-agent" "${agent}"

  declare -gA base_packages=()
  local pkg
  while read -r pkg; do base_packages["${pkg}"]=1; done < <(base_image_packages)

  check_libraries "${tmp}/chamberd" chamberd "${chamberd_dockerfile}"
  check_libraries "${tmp}/chamber-agent" chamber-agent "${agent_dockerfile}"
  check_nvml_dlopen "${tmp}/chamber-agent"
  if readelf -d "${tmp}/chamberd" | grep -q 'NEEDED.*libnvidia-ml'; then
    fail "chamberd links libnvidia-ml; chamberd runs on nodes without a GPU driver"
  fi
  check_dashboard "${tmp}/chamberd"
}

# build_images: both Dockerfiles through buildah, from a local base image, then --version.
build_images() {
  local tool
  for tool in buildah mmdebstrap; do
    command -v "${tool}" >/dev/null 2>&1 ||
      skip "'${tool}' is not installed (Debian: apt-get install buildah mmdebstrap)"
  done
  [[ "$(id -u)" -eq 0 ]] || skip "building images with chroot isolation needs root"
  local sources="" file
  for file in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    if [[ -s "${file}" ]]; then
      sources="${file}"
      break
    fi
  done
  [[ -n "${sources}" ]] || skip "no apt sources on this machine to bootstrap a base image from"
  codename="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
  [[ "${codename}" == bookworm ]] || skip "the images are bookworm; this machine is '${codename}'"

  tmp="$(mktemp -d "${TMPDIR:-/tmp}/chamber-images.XXXXXX")"
  local -a bh=(buildah --root "${tmp}/storage" --runroot "${tmp}/run" --storage-driver vfs)
  cleanup() {
    "${bh[@]}" rm --all >/dev/null 2>&1 || true
    rm -rf "${tmp}"
  }
  trap cleanup EXIT

  # debian:bookworm and debian:bookworm-slim, as far as these builds go: a minbase bootstrap.
  log "bootstrapping a Debian ${codename} base image with mmdebstrap (${sources})"
  mmdebstrap --quiet --variant=minbase "${codename}" "${tmp}/base.tar" "${sources}" ||
    skip "mmdebstrap could not bootstrap ${codename} from ${sources}"
  local container
  container="$("${bh[@]}" from scratch)"
  "${bh[@]}" add "${container}" "${tmp}/base.tar" / >/dev/null
  "${bh[@]}" config --cmd /bin/bash "${container}"
  "${bh[@]}" commit --quiet "${container}" "docker.io/library/debian:${codename}" >/dev/null
  "${bh[@]}" tag "docker.io/library/debian:${codename}" "docker.io/library/debian:${codename}-slim"
  "${bh[@]}" rm "${container}" >/dev/null

  local dockerfile image binary version
  for dockerfile in "${chamberd_dockerfile}" "${agent_dockerfile}"; do
    image="localhost/$(basename "${dockerfile}" .Dockerfile):check"
    binary="$(awk '$1 == "ENTRYPOINT" { gsub(/[]["]/, "", $2); print $2 }' "${dockerfile}")"
    log "building ${image} from ${dockerfile}"
    if ! "${bh[@]}" build --pull=never --isolation chroot --layers=false \
      --ignorefile "${dockerfile}.dockerignore" -f "${dockerfile}" -t "${image}" .; then
      fail "${dockerfile}: the image does not build"
      continue
    fi
    container="$("${bh[@]}" from "${image}")"
    if version="$("${bh[@]}" run --isolation chroot "${container}" -- "${binary}" --version 2>&1)"; then
      log "${image}: ${version}"
    else
      fail "${image}: ${binary} --version fails: ${version}"
    fi
    "${bh[@]}" rm "${container}" >/dev/null
  done
}

case "${1:-static}" in
  static) static_checks ;;
  build) build_images ;;
  *) log "unknown mode '$1' (usage: check-images.sh [static|build])"; exit 2 ;;
esac

if [[ ${failures} -gt 0 ]]; then
  log "${failures} problem(s)"
  exit 1
fi
log "ok"
