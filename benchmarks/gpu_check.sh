#!/usr/bin/env bash
# The GPU checks in one run, at most 8 minutes on one GPU: the `gpu` tests (the Triton MX
# quantization kernel against the CPU quantizer, quantize_mx and the MXFP8 ops dispatching to
# it, the grouped GEMM and an MXFP8 model step on CUDA against the CPU), then benchmarks/mx.py,
# whose "gpu" entry holds the kernel's bandwidth as a share of peak and the step times on the
# GPU. The benchmark runs even when a test fails; the script then exits with the tests' status.
#
#   benchmarks/gpu_check.sh            # with .venv/bin/python when there is one, else python3
#   PYTHON=/path/to/python benchmarks/gpu_check.sh
#
# The interpreter needs a CUDA build of torch (Triton ships with it), pytest, and the project's
# dependencies; the project itself is taken from src/ so it needs no install.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
	if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" - <<'PY'
import torch
import triton
assert torch.cuda.is_available(), "no CUDA device: nothing to check"
print(f"torch {torch.__version__}, triton {triton.__version__}, on {torch.cuda.get_device_name()}")
PY
tests=0
timeout 300 "$PYTHON" -m pytest -q -rs -m gpu -p no:cacheprovider tests/unit/mx/test_mx_triton.py tests/unit/mx/test_mx_cuda.py ||
	tests=$?
timeout 180 "$PYTHON" benchmarks/mx.py --rows 2048 --cols 2048 --steps 3 --repeats 3
exit "$tests"
