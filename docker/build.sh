#!/usr/bin/env bash
# Build astra-sim:TAG (ASTRA-sim's analytical and ns-3 backends, from your source tree) and then
# astra-hetero:TAG on top of it. See docker/README.md.
#
#   docker/build.sh --astra-sim-src DIR [--tag TAG] [--base IMAGE] [--yaml-cpp DIR] [--ca-cert FILE]
#                   [--jobs N] [--astra-sim-only]
#
# --astra-sim-src DIR  an ASTRA-sim checkout with its submodules (third_party/README.md names the commits)
# --tag TAG            image tag; default: the astra-hetero version (pyproject.toml)
# --base IMAGE         a local Debian 12 image to build on; default debian:bookworm. Never pulled.
# --yaml-cpp DIR       yaml-cpp source (revision a83cd31) for CMake's FetchContent; default: the first of
#                      DIR/extern/helper/yaml-cpp and DIR/build/astra_analytical/build/_deps/yaml-cpp-src
#                      (where an earlier online build of ASTRA-sim left it)
# --ca-cert FILE       a PEM bundle pip should trust while installing astra-hetero (copied into the build
#                      context for the build only: docker/build-ca.pem, git-ignored, removed afterwards)
# --jobs N             parallel compile jobs (default: one per CPU)
# --astra-sim-only     stop after astra-sim:TAG
#
# Proxies and package indexes are taken from the environment and passed on as build arguments when set:
# HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and lower-case), PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST.
set -euo pipefail

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "build.sh: $*" >&2; exit 2; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SRC= TAG= BASE=debian:bookworm YAML= CA= JOBS= ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --astra-sim-src) SRC=${2:?--astra-sim-src needs a directory}; shift 2 ;;
    --tag) TAG=${2:?--tag needs a value}; shift 2 ;;
    --base) BASE=${2:?--base needs an image}; shift 2 ;;
    --yaml-cpp) YAML=${2:?--yaml-cpp needs a directory}; shift 2 ;;
    --ca-cert) CA=${2:?--ca-cert needs a file}; shift 2 ;;
    --jobs) JOBS=${2:?--jobs needs a number}; shift 2 ;;
    --astra-sim-only) ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[ -n "$SRC" ] || { usage >&2; die "--astra-sim-src DIR is required"; }
[ -d "$SRC" ] || die "--astra-sim-src: $SRC is not a directory"
SRC=$(cd "$SRC" && pwd)
for f in CMakeLists.txt build/astra_analytical/build.sh extern/network_backend/ns-3/ns3 \
         extern/network_backend/analytical/CMakeLists.txt extern/graph_frontend/chakra/schema/protobuf/et_def.proto; do
  [ -e "$SRC/$f" ] || die "--astra-sim-src: $SRC/$f is missing (an ASTRA-sim checkout with submodules:" \
                          "git clone --recursive, or git submodule update --init)"
done
if [ -z "$YAML" ]; then
  for d in "$SRC/extern/helper/yaml-cpp" "$SRC/build/astra_analytical/build/_deps/yaml-cpp-src"; do
    [ -f "$d/CMakeLists.txt" ] && { YAML=$d; break; }
  done
  [ -n "$YAML" ] || die "no yaml-cpp source found; pass --yaml-cpp DIR (a checkout of" \
                        "https://github.com/jbeder/yaml-cpp at a83cd31, the revision ASTRA-sim's CMake downloads)"
fi
[ -f "$YAML/CMakeLists.txt" ] || die "--yaml-cpp: $YAML/CMakeLists.txt is missing"
YAML=$(cd "$YAML" && pwd)
[ -z "$CA" ] || [ -f "$CA" ] || die "--ca-cert: $CA is not a file"
[ -z "$JOBS" ] || [[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs: $JOBS is not a positive number"
if [ -z "$TAG" ]; then
  TAG=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -1)
  [ -n "$TAG" ] || die "could not read the version from $REPO/pyproject.toml; pass --tag"
fi
command -v docker >/dev/null || die "docker not found"
docker info >/dev/null 2>&1 || die "Docker engine unreachable (start it, or set DOCKER_HOST)"
docker image inspect "$BASE" >/dev/null 2>&1 \
  || die "--base: no local image $BASE (make one, e.g. with debootstrap: see docker/README.md; nothing is pulled)"

# Commits of every component: from git when the tree is a checkout, else from SRC/SOURCE_COMMITS
# (lines "<path> <commit>", "." for ASTRA-sim itself; what `git submodule status` prints, signs removed).
commit_of() { # path inside SRC
  local p=$1 c=""
  if git -C "$SRC/$p" rev-parse --show-toplevel >/dev/null 2>&1 \
     && [ "$(git -C "$SRC/$p" rev-parse --show-toplevel)" = "$(cd "$SRC/$p" && pwd -P)" ]; then
    c=$(git -C "$SRC/$p" rev-parse HEAD 2>/dev/null || true)
  fi
  if [ -z "$c" ] && [ -f "$SRC/SOURCE_COMMITS" ]; then
    c=$(awk -v p="$p" '$1 == p { print $2; exit }' "$SRC/SOURCE_COMMITS")
  fi
  echo "${c:-unknown}"
}
yaml_commit() {
  local c=""
  c=$(git -C "$YAML" rev-parse HEAD 2>/dev/null || true)
  [ -n "$c" ] && [ "$(git -C "$YAML" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$YAML" && pwd -P)" ] || c=""
  [ -n "$c" ] || { [ -f "$SRC/SOURCE_COMMITS" ] && c=$(awk '$1 == "yaml-cpp" { print $2; exit }' "$SRC/SOURCE_COMMITS"); }
  echo "${c:-unknown}"
}
COMMITS=(
  "ASTRA_SIM_COMMIT=$(commit_of .)"
  "CHAKRA_COMMIT=$(commit_of extern/graph_frontend/chakra)"
  "NETWORK_ANALYTICAL_COMMIT=$(commit_of extern/network_backend/analytical)"
  "NETWORK_NS3_COMMIT=$(commit_of extern/network_backend/ns-3)"
  "MEMORY_ANALYTICAL_COMMIT=$(commit_of extern/remote_memory_backend/analytical)"
  "FMT_COMMIT=$(commit_of extern/helper/fmt)"
  "SPDLOG_COMMIT=$(commit_of extern/helper/spdlog)"
  "YAML_CPP_COMMIT=$(yaml_commit)"
)

net_args=()
for v in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy \
         PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST; do
  [ -z "${!v:-}" ] || net_args+=(--build-arg "$v=${!v}")
done

commit_args=()
for kv in "${COMMITS[@]}"; do commit_args+=(--build-arg "$kv"); echo "build.sh: $kv"; done

# The build context, streamed as a tar (the tree itself is left untouched): the Dockerfile at its root,
# the source tree under src/ without VCS data and earlier build outputs, yaml-cpp under
# src/.astra-hetero-yaml-cpp/. Only src/ is copied into the image, so a changed Dockerfile keeps the
# compiled layers cached.
re_escape() { printf '%s' "$1" | sed 's/[][\.*^$|]/\\&/g'; }
ybase=$(basename "$YAML")
context() {
  tar -c -f - --exclude-vcs \
      --exclude=./build/astra_analytical/build --exclude=./build/astra_ns3/build \
      --exclude=./extern/network_backend/ns-3/build --exclude=./extern/network_backend/ns-3/cmake-cache \
      --exclude=./extern/helper/yaml-cpp/build \
      --transform "s|^\\./|src/|S" \
      --transform "s|^$(re_escape "$ybase")\\(/\\|\$\\)|src/.astra-hetero-yaml-cpp\\1|S" \
      --transform "s|^astra-sim\\.Dockerfile\$|Dockerfile|" \
      -C "$SRC" . \
      -C "$(dirname "$YAML")" --exclude="$ybase/build" "$ybase" \
      -C "$HERE" astra-sim.Dockerfile
}

start=$(date +%s)
echo "build.sh: building astra-sim:$TAG from $SRC on $BASE (yaml-cpp from $YAML)"
context | docker build -f Dockerfile -t "astra-sim:$TAG" \
  --build-arg "BASE_IMAGE=$BASE" --build-arg SOURCE_DIR=src --build-arg YAML_CPP_DIR=.astra-hetero-yaml-cpp \
  ${JOBS:+--build-arg "JOBS=$JOBS"} "${commit_args[@]}" ${net_args[@]+"${net_args[@]}"} -
mid=$(date +%s)
echo "build.sh: astra-sim:$TAG built in $(( (mid - start) / 60 )) min $(( (mid - start) % 60 )) s"
[ "$ONLY" = 1 ] && exit 0

ca_args=()
if [ -n "$CA" ]; then
  cp "$CA" "$HERE/build-ca.pem"
  trap 'rm -f "$HERE/build-ca.pem"' EXIT
  ca_args=(--build-arg CA_CERT=docker/build-ca.pem)
fi
hetero_commit=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
docker build -f "$HERE/Dockerfile" -t "astra-hetero:$TAG" \
  --build-arg "ASTRA_SIM_IMAGE=astra-sim:$TAG" --build-arg "ASTRA_HETERO_COMMIT=$hetero_commit" \
  ${ca_args[@]+"${ca_args[@]}"} ${net_args[@]+"${net_args[@]}"} "$REPO"
end=$(date +%s)
echo "build.sh: astra-hetero:$TAG built in $(( (end - mid) / 60 )) min $(( (end - mid) % 60 )) s;" \
     "total $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s"
