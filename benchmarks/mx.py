"""MX speed on this machine: quantization throughput next to torchao's `to_mx`, and the step time of
the tiny policy with its GEMMs emulated in MXFP8 against plain fp32.

Quantization throughput counts the bytes a quantizer must move: the input read plus the FP8
elements and E8M0 scales written, divided by the median time of `--repeats` calls. `overture`
is measured with blocks along the last dim (rows) and along dim 0 (the transposed orientation of
the backward pass); torchao's reference quantizer, when installed, on the same tensor in the
same process. The step time is one forward + backward + AdamW step of the model of `--config` on
random tokens. With CUDA, `"gpu"` holds the Triton kernel's quantize bandwidth in both
orientations (float32 and bfloat16 inputs, `--gpu-rows` × `--gpu-cols`), as GB/s and as a fraction
of `--peak-tb-s` (the H200's 4.8 TB/s by default), next to torchao's `to_mx` on the same tensor,
and the same step time as above on the GPU (MXFP8 quantizing with the Triton kernel); without
CUDA it is null. Prints one JSON object on its last line.

    .venv/bin/python benchmarks/mx.py [--rows 4096] [--cols 4096] [--config configs/sft_tiny.toml]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from overture.config import load_config
from overture.model import Transformer
from overture.mx import quantize_mx, quantize_mx_dim

REPO = Path(__file__).resolve().parents[1]


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bytes_moved(x: torch.Tensor, block_size: int = 32) -> int:
    """Input read + one byte per element + one byte per block of scales written."""
    return x.numel() * x.element_size() + x.numel() + x.numel() // block_size


def torchao_quantizer(scaling: str) -> Callable[[torch.Tensor], object] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.prototype.mx_formats.config import ScaleCalculationMode
            from torchao.prototype.mx_formats.mx_tensor import to_mx
    except ImportError:
        return None
    mode = ScaleCalculationMode.FLOOR if scaling == "floor" else ScaleCalculationMode.RCEIL
    return lambda x: to_mx(x, torch.float8_e4m3fn, 32, scaling_mode=mode)


def quantize_throughput(args: argparse.Namespace) -> dict:
    """GB/s per quantizer, dtype and scale rule on a rows × cols tensor."""
    results: dict[str, dict] = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.rows, args.cols).to(dtype)
        moved = bytes_moved(x)
        for scaling in ("floor", "rceil"):
            candidates = {
                "overture_rows": lambda x=x, s=scaling: quantize_mx(x, scaling=s),
                "overture_dim0": lambda x=x, s=scaling: quantize_mx_dim(x, 0, scaling=s),
            }
            reference = torchao_quantizer(scaling)
            if reference is not None:
                candidates["torchao_to_mx"] = lambda x=x, q=reference: q(x)
            key = f"{str(dtype).removeprefix('torch.')}_{scaling}"
            results[key] = {
                name: round(moved / median_seconds(fn, args.repeats) / 1e9, 3)
                for name, fn in candidates.items()
            }
    return results


def cuda_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median device time of `fn` (after a warm-up call that also compiles the kernel)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def gpu_measurements(args: argparse.Namespace) -> dict | None:
    """GB/s and share of peak memory bandwidth of the Triton kernel (and torchao) on CUDA, and the
    fp32 and MXFP8-emulated step times there."""
    if not torch.cuda.is_available():
        return None
    from overture.mx.triton_quantize import available, quantize_mx_triton

    if not available():
        return None
    results: dict[str, dict] = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.gpu_rows, args.gpu_cols, device="cuda").to(dtype)
        moved = bytes_moved(x)
        for scaling in ("floor", "rceil"):
            candidates = {
                "overture_rows": lambda x=x, s=scaling: quantize_mx_triton(x, -1, scaling=s),
                "overture_dim0": lambda x=x, s=scaling: quantize_mx_triton(x, 0, scaling=s),
            }
            reference = torchao_quantizer(scaling)
            if reference is not None:
                candidates["torchao_to_mx"] = lambda x=x, q=reference: q(x)
            entry = {}
            for name, fn in candidates.items():
                gb_per_s = moved / cuda_seconds(fn, args.repeats * 4) / 1e9
                entry[name] = {
                    "gb_per_s": round(gb_per_s, 1),
                    "share_of_peak": round(gb_per_s / (args.peak_tb_s * 1e3), 3),
                }
            results[f"{str(dtype).removeprefix('torch.')}_{scaling}"] = entry
    return {
        "device": torch.cuda.get_device_name(),
        "shape": [args.gpu_rows, args.gpu_cols],
        "peak_tb_s": args.peak_tb_s,
        "quantize": results,
        "train_step": train_step(args, "cuda"),
    }


def step_seconds(args: argparse.Namespace, precision: str, device: str = "cpu") -> float:
    """Median forward + backward + AdamW step of the config's model with GEMMs in `precision`."""
    config = load_config(args.config, [f"model.precision={precision}"])
    torch.manual_seed(0)
    model = Transformer(config.model).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, config.model.vocab_size, (args.batch, args.seq_len + 1), device=device)

    def step() -> None:
        logits = model(tokens[:, :-1]).logits
        F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    if device == "cpu":
        return median_seconds(step, args.steps)
    return cuda_seconds(step, args.steps)


def train_step(args: argparse.Namespace, device: str = "cpu") -> dict:
    """fp32 and MXFP8-emulated step times of the config's model on `device`."""
    fp32, mxfp8 = step_seconds(args, "fp32", device), step_seconds(args, "mxfp8", device)
    return {
        "config": os.path.relpath(args.config, REPO),
        "tokens": args.batch * args.seq_len,
        "fp32_seconds": round(fp32, 4),
        "mxfp8_emulated_seconds": round(mxfp8, 4),
        "mxfp8_over_fp32": round(mxfp8 / fp32, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", default=str(REPO / "configs" / "sft_tiny.toml"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gpu-rows", type=int, default=16384)
    parser.add_argument("--gpu-cols", type=int, default=16384)
    parser.add_argument("--peak-tb-s", type=float, default=4.8, help="the GPU's memory bandwidth (H200: 4.8)")
    args = parser.parse_args()
    summary = {
        "benchmark": "mx",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "quantize_shape": [args.rows, args.cols],
        "quantize_gb_per_s": quantize_throughput(args),
        "train_step": train_step(args),
        "gpu": gpu_measurements(args),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
