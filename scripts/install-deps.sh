#!/usr/bin/env bash
# Installs the Debian packages tilefuse builds with; does nothing when all are present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config python3 python3-venv python3-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libopenblas-dev libopenblas-openmp-dev libdnnl-dev graphviz
  strace  # tests/errors/cli_untrusted_files_test.cc watches the files a model import opens
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "tilefuse: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
