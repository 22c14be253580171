#!/usr/bin/env bash
# Installs what moesplit builds with (Debian packages, only those missing), then configures and
# builds it. Idempotent: a second run installs nothing and rebuilds only what changed.
#
#   scripts/setup.sh [PRESET] [extra cmake -D options...]     PRESET: release (default) | cpu | debug | cuda
set -euo pipefail
cd "$(dirname "$0")/.."

PRESET="${1:-release}"
shift || true

PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev curl
          libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
          pkg-config libpcre2-dev
          libhwloc-dev hwloc libnuma-dev libyaml-cpp-dev libtbb-dev libomp-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

JOBS="${MOESPLIT_JOBS:-$(nproc)}"
cmake --preset "$PRESET" "$@" >/dev/null
cmake --build --preset "$PRESET" -j "$JOBS"
echo "setup: built build/$PRESET (binary: build/$PRESET/apps/moesplit)" >&2
