#!/usr/bin/env bash
# Configures and builds tilefuse into BUILD_DIR (default: build). Extra args go to cmake;
# TARGETS (default: all) names what ninja builds.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
./scripts/install-deps.sh
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$BUILD_DIR" -j"$(nproc)" ${TARGETS:-}
