#!/usr/bin/env bash
# The main job: build tilefuse, then run the classic workloads (`tilefuse demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh -DTILEFUSE_BUILD_TESTS=OFF
exec ./build/tilefuse demo "$@"
