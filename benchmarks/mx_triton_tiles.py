"""Tile sizes of the Triton MX quantization kernel on this GPU: bandwidth of each (COLUMNS,
num_warps) pair for blocks along the last dim and along dim 0, float32 and bfloat16 inputs,
FLOOR scales (RCEIL costs the same), on a `--rows` × `--cols` tensor. Needs CUDA. Prints one JSON
object on its last line: GB/s and share of `--peak-tb-s` per setting, and the best per case.

    python benchmarks/mx_triton_tiles.py [--rows 16384] [--cols 16384]
"""

from __future__ import annotations

import argparse
import json

import torch
from mx import bytes_moved, cuda_seconds

import overture.mx.triton_quantize as triton_quantize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=16384)
    parser.add_argument("--columns", type=int, nargs="+", default=[32, 64, 128, 256, 512])
    parser.add_argument("--warps", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--peak-tb-s", type=float, default=4.8)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs CUDA"
    cases: dict[str, dict] = {}
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(args.rows, args.cols, device="cuda").to(dtype)
        for dim in (-1, 0):
            settings = {}
            for columns in args.columns:
                for warps in args.warps:
                    triton_quantize.COLUMNS, triton_quantize.NUM_WARPS = columns, warps
                    quantize = triton_quantize.quantize_mx_triton
                    seconds = cuda_seconds(lambda x=x, d=dim, q=quantize: q(x, d), args.repeats)
                    gb_per_s = bytes_moved(x) / seconds / 1e9
                    settings[f"{columns}x{warps}"] = {
                        "gb_per_s": round(gb_per_s, 1),
                        "share_of_peak": round(gb_per_s / (args.peak_tb_s * 1e3), 3),
                    }
            best = max(settings, key=lambda k: settings[k]["gb_per_s"])
            cases[f"{str(dtype).removeprefix('torch.')}_dim{dim}"] = {"best": best, "settings": settings}
    print(
        json.dumps(
            {
                "benchmark": "mx_triton_tiles",
                "device": torch.cuda.get_device_name(),
                "shape": [args.rows, args.cols],
                "cases": cases,
            }
        )
    )


if __name__ == "__main__":
    main()
