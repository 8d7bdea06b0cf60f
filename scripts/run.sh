#!/usr/bin/env bash
# The main job: set up and build, then train the default UoE model (tiny-uoe) on the default
# corpus (TinyShakespeare from ../shared/data), with a progress bar, validation and checkpoints
# in runs/tiny-uoe, replacing an earlier run there. Extra flags go to `uoe train` (e.g. --steps 100; --resume
# continues the earlier run instead).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
data="${UOE_DATA:-../shared/data/tinyshakespeare.txt}"
[ -f "$data" ] || { echo "uoe: corpus not found at $data (set UOE_DATA=<text file>)" >&2; exit 1; }
fresh=(--overwrite)  # a new run replaces the last one, unless --resume asks to continue it
for flag in "$@"; do [ "$flag" = --resume ] && fresh=(); done
if ((${#fresh[@]})) && [ -e runs/tiny-uoe ]; then
  echo "uoe: this run replaces the last one in runs/tiny-uoe. To keep that one, stop now (Ctrl-C) and move it" \
       "away (mv runs/tiny-uoe runs/kept); to continue it instead, pass --resume." >&2
fi
./build/uoe train --config tiny-uoe --data "$data" --out runs/tiny-uoe --steps 600 --minutes 10 --threads "$(nproc)" \
  "${fresh[@]}" "$@"
