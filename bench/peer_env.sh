#!/usr/bin/env bash
# Makes the virtual environment of the PyTorch peer (bench/pytorch_peer.py): current PyTorch 2.x from PyPI, outside
# the source tree, for CPU runs. Never a dependency of uoe, its build or its tests.
#   bench/peer_env.sh [VENV]     (VENV defaults to ${XDG_CACHE_HOME:-~/.cache}/uoe-peer), then
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE VENV/bin/python bench/pytorch_peer.py cpu --threads 2
# PyPI's Linux x86-64 torch wheel is the CUDA build, and `import torch` loads its CUDA libraries (cuBLAS, cuDNN,
# cuFile, cuSPARSELt, NCCL, NVSHMEM...) even on a CPU machine, so they stay. What a CPU run does not need is left
# out: the wheel is installed with --no-deps, then every requirement it declares except triton and cuda-bindings
# (GPU code generation and Python CUDA bindings; torch.compile on the CPU generates C++ instead).
# PEER_TORCH picks the version (default: the newest 2.x).
set -euo pipefail
venv=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/uoe-peer}
torch_spec=${PEER_TORCH:-torch>=2,<3}

[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
py="$venv/bin/python"
pip=("$py" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
"${pip[@]}" --no-deps "$torch_spec"
"${pip[@]}" packaging
requirements=$("$py" - <<'PY'
import importlib.metadata as md
from packaging.requirements import Requirement
for text in md.requires("torch") or []:
    r = Requirement(text)
    if r.name in ("triton", "cuda-bindings") or (r.marker and not r.marker.evaluate({"extra": ""})):
        continue
    print(str(r).split(";")[0].strip())
PY
)
# shellcheck disable=SC2086  # one requirement a line, none with spaces
"${pip[@]}" --no-warn-conflicts $requirements numpy
"$py" -c 'import torch; print(f"uoe peer: PyTorch {torch.__version__} at {torch.__file__}, CPU capability",
          torch.backends.cpu.get_cpu_capability())'
