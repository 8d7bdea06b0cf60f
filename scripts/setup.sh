#!/usr/bin/env bash
# Installs the Debian packages uoe needs (when missing), then configures and builds it in build/.
# Extra CMake arguments: UOE_CMAKE_ARGS="-DUOE_CUDA=OFF" ./scripts/setup.sh ; build dir: UOE_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ make libgtest-dev libgmock-dev libbenchmark-dev libopenblas-pthread-dev openmpi-bin libopenmpi-dev libcli11-dev nlohmann-json3-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "uoe setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

build_dir="${UOE_BUILD_DIR:-build}"
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${UOE_CMAKE_ARGS:-}
cmake --build "$build_dir" -j"$(nproc)"
