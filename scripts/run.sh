#!/usr/bin/env bash
# The main job: set up and build, then train the demo model and print its loss falling.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./build/fit_mlp "$@"
