"""Rollout engine against Hugging Face `transformers` `generate()` on the same weights.

A tiny Qwen3-MoE (about 6M parameters) is built with random weights, written with
`overture.model.save_pretrained`, and loaded both by `overture.engine.Engine.from_pretrained` and
by `transformers.AutoModelForCausalLM`. Both sample (temperature 1, top-p 1) the same number of
new tokens from the same prompts, with stopping disabled. Figures: decode tokens/s at several
batch sizes (and of the engine with its C GEMM and sampling kernels off), prefill tokens/s, time
for `abort("all")` to return with 32 requests running, the decode step at 1,024 tokens of
context with and without the C attention kernel, and memory (KV pool, peak resident set).
`generate()` is timed at torch's thread count and on one thread, and the speed-ups are stated
against both. The engine raises glibc's malloc thresholds for the whole process when it starts
(`overture.runtime.cpu`), so `generate()` runs with them too.

Usage: python benchmarks/engine.py [--batches 1,8,32,64] [--new-tokens 64] [--prompt-len 32]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time

import torch

from overture.config import ModelConfig
from overture.engine import Engine
from overture.model import Transformer, save_pretrained
from overture.runtime.cpu import intra_op_threads

BENCH_MODEL = ModelConfig(
    vocab_size=4096,
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    num_experts=8,
    num_experts_per_tok=2,
    moe_intermediate_size=128,
    max_position_embeddings=2048,
)


def timed(fn) -> tuple[float, float]:
    """Wall seconds and process CPU seconds of one call of `fn`."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def compare(sides: dict, repeats: int) -> dict[str, dict[str, float]]:
    """Best wall and CPU seconds of each side over `repeats` interleaved runs after a warm-up of each.

    Interleaving and taking the fastest run keep a burst of load from other processes (the machine
    may be shared) from landing on one side only. CPU seconds count only this process's work, so
    they are steadier than wall seconds under contention.
    """
    for fn in sides.values():
        fn()
    best = {name: {"wall": 1e9, "cpu": 1e9} for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            wall, cpu = timed(fn)
            best[name]["wall"] = min(best[name]["wall"], wall)
            best[name]["cpu"] = min(best[name]["cpu"], cpu)
    return best


def prompts_for(batch: int, length: int, vocab: int, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, length), generator=gen).tolist()


def hf_generate(hf_model, prompts: list[list[int]], new_tokens: int, threads: int = 0):
    """`generate()` on the prompts; with `threads`, torch runs it on that many intra-op threads."""
    ids = torch.tensor(prompts)
    mask = torch.ones_like(ids)

    def run():
        with torch.inference_mode(), intra_op_threads(threads):
            hf_model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=0,
            )

    return run


def engine_generate(engine: Engine, prompts: list[list[int]], new_tokens: int):
    def run():
        out = engine.generate(prompts, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, seed=0)
        assert all(len(c.token_ids) == new_tokens for c in out)

    return run


def rates(best: dict[str, dict[str, float]], tokens: int) -> dict[str, float]:
    """Tokens per wall second and per CPU second of each side, and the engine's speed-up over each."""
    row = {}
    for name, seconds in best.items():
        row[f"{name}_tokens_per_s"] = tokens / seconds["wall"]
        row[f"{name}_tokens_per_cpu_s"] = tokens / seconds["cpu"]
    for name, seconds in best.items():
        if name != "engine":
            row[f"speedup_over_{name}"] = seconds["wall"] / best["engine"]["wall"]
    return row


def decode_figures(engine, torch_engine, hf_model, batches, prompt_len, new_tokens, repeats) -> list[dict]:
    """Decode tokens/s of the engine, of the same engine with its C GEMM and sampling kernels off
    (`torch_engine`), and of `generate()` at torch's thread count and at one thread.

    The engine decodes on its own thread count (`EngineConfig.decode_threads`); `generate()` is
    measured both ways so that the speed-up is also stated against its faster setting."""
    rows = []
    for batch in batches:
        prompts = prompts_for(batch, prompt_len, BENCH_MODEL.vocab_size)
        sides = {
            "engine": engine_generate(engine, prompts, new_tokens),
            "engine_torch_kernels": engine_generate(torch_engine, prompts, new_tokens),
            "hf_generate": hf_generate(hf_model, prompts, new_tokens),
            "hf_generate_1_thread": hf_generate(hf_model, prompts, new_tokens, threads=1),
        }
        row = {"batch": batch, **rates(compare(sides, repeats), batch * new_tokens)}
        row["speedup_over_best_hf_generate"] = min(
            row["speedup_over_hf_generate"], row["speedup_over_hf_generate_1_thread"]
        )
        rows.append(row)
        print(
            f"batch {batch:3d}: engine {row['engine_tokens_per_s']:8,.0f} tok/s, generate() "
            f"{row['hf_generate_tokens_per_s']:8,.0f} tok/s ({row['speedup_over_hf_generate']:.2f}x), "
            f"generate() on 1 thread {row['hf_generate_1_thread_tokens_per_s']:8,.0f} tok/s "
            f"({row['speedup_over_hf_generate_1_thread']:.2f}x), torch kernels "
            f"{row['engine_torch_kernels_tokens_per_s']:8,.0f} tok/s"
        )
    return rows


def model_floor(model: Transformer, batches: list[int], repeats: int) -> list[dict]:
    """Tokens/s of the bare model on one token per sequence (no cache, no attention to a past):
    a ceiling for any decoder built from these modules, to read the decode figures against."""
    rows = []
    for batch in batches:
        # Distinct tokens, so that the routers spread them over the experts as real decoding does.
        ids = torch.randint(3, BENCH_MODEL.vocab_size, (batch, 1), generator=torch.Generator().manual_seed(3))

        def forward(ids=ids):
            with torch.inference_mode():
                model(ids)

        forward()
        seconds = min(timed(forward)[1] for _ in range(max(repeats, 20)))
        rows.append({"batch": batch, "tokens_per_cpu_s": batch / seconds})
    return rows


def prefill_figures(engine, hf_model, batch: int, length: int, repeats: int) -> dict:
    """Prompt tokens/s: the engine's prefill (one new token each) against one HF forward."""
    prompts = prompts_for(batch, length, BENCH_MODEL.vocab_size, seed=1)
    ids = torch.tensor(prompts)

    def hf_forward():
        with torch.inference_mode():
            hf_model(input_ids=ids)

    best = compare({"engine": engine_generate(engine, prompts, 1), "hf_forward": hf_forward}, repeats)
    return {"batch": batch, "prompt_len": length, **rates(best, batch * length)}


def prefix_cache_figures(model, shared: int, own: int, batch: int, repeats: int) -> dict:
    """Prompt tokens/s of `batch` prompts that share their first `shared` tokens (a system
    message) and have `own` new tokens each (fresh ones every run), with the prefix cache (the
    shared blocks computed by an earlier request) and without it."""
    gen = torch.Generator().manual_seed(5)
    system = torch.randint(3, BENCH_MODEL.vocab_size, (shared,), generator=gen).tolist()
    runs = iter(range(10**6))

    def fresh_prompts(engine: Engine):
        def run():
            own_tokens = prompts_for(batch, own, BENCH_MODEL.vocab_size, seed=100 + next(runs))
            engine.generate([system + p for p in own_tokens], max_new_tokens=1, temperature=1.0, seed=0)

        return run

    with (
        Engine(model, max_batch_size=64, kv_cache_tokens=65536) as cached,
        Engine(model, max_batch_size=64, kv_cache_tokens=65536, prefix_caching=False) as plain,
    ):
        cached.generate([[*system, 3]], max_new_tokens=1)  # an earlier request with the same system message
        best = compare(
            {"engine": fresh_prompts(cached), "engine_without_cache": fresh_prompts(plain)}, repeats
        )
        stats = cached.stats()
    return {
        "shared_tokens": shared,
        "own_tokens": own,
        "batch": batch,
        **rates(best, batch * (shared + own)),
        "hit_tokens": stats["prefix_cache_hit_tokens"],
        "computed_tokens": stats["prefill_tokens"],
    }


def long_context_figures(model, batch: int, prompt_len: int, repeats: int) -> dict:
    """Decode step time at an agent's context length, attention reading the paged cache in place
    (the C kernel, `engine.native_attention`) against gathering the blocks for torch's SDPA."""
    prompts = prompts_for(batch, prompt_len, BENCH_MODEL.vocab_size, seed=4)
    tokens = batch * (prompt_len + 40)
    steps = {}
    for native in (True, False):
        with Engine(
            model, max_batch_size=batch, kv_cache_tokens=tokens, prefix_caching=False, native_attention=native
        ) as engine:
            steps[native] = min(_decode_step_seconds(engine, prompts) for _ in range(max(repeats, 2)))
    return {
        "batch": batch,
        "prompt_len": prompt_len,
        "decode_step_seconds_native": steps[True],
        "decode_step_seconds_gather": steps[False],
        "speedup": steps[False] / steps[True],
    }


def abort_seconds(engine: Engine, batch: int, prompt_len: int, trials: int = 5) -> dict:
    """Wall time of `abort("all")` with `batch` requests decoding, against one decode step."""
    prompts = prompts_for(batch, prompt_len, BENCH_MODEL.vocab_size, seed=2)
    samples, partial_tokens = [], 0
    for trial in range(trials):
        handles = [
            engine.submit(p, max_new_tokens=1000, temperature=1.0, seed=trial * batch + i)
            for i, p in enumerate(prompts)
        ]
        while engine.stats()["running"] < batch:
            time.sleep(0.001)
        time.sleep(0.1)
        start = time.perf_counter()
        partial = engine.abort("all")
        samples.append(time.perf_counter() - start)
        assert all(h.result().finish_reason == "abort" for h in handles)
        partial_tokens = sum(len(c.token_ids) for c in partial)
    return {
        "batch": batch,
        "abort_seconds_median": sorted(samples)[len(samples) // 2],
        "abort_seconds_max": max(samples),
        "decode_step_seconds": _decode_step_seconds(engine, prompts),
        "partial_tokens_last_trial": partial_tokens,
    }


def _decode_step_seconds(engine: Engine, prompts: list[list[int]]) -> float:
    start = time.perf_counter()
    engine.generate(prompts, max_new_tokens=33, temperature=1.0, seed=0)
    with_decode = time.perf_counter() - start
    start = time.perf_counter()
    engine.generate(prompts, max_new_tokens=1, temperature=1.0, seed=0)
    return (with_decode - (time.perf_counter() - start)) / 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = Transformer(BENCH_MODEL)
    with tempfile.TemporaryDirectory() as directory:
        save_pretrained(model, directory)
        hf_model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).to(args.device).eval()
        # No prefix cache: the runs repeat their prompts, and each side must compute them.
        options = dict(device=args.device, max_batch_size=64, kv_cache_tokens=16384, prefix_caching=False)
        engine = Engine.from_pretrained(directory, **options)
        torch_engine = Engine.from_pretrained(directory, **options, native_gemm=False, native_sampling=False)
    batches = [int(b) for b in args.batches.split(",")]
    try:
        decode = decode_figures(
            engine, torch_engine, hf_model, batches, args.prompt_len, args.new_tokens, args.repeats
        )
        prefill = prefill_figures(engine, hf_model, 16, 256, args.repeats)
        prefix_cache = prefix_cache_figures(engine.model, 1536, 128, 8, args.repeats)
        floor = model_floor(engine.model, batches, args.repeats)
        abort = abort_seconds(engine, 32, args.prompt_len)
        long_context = long_context_figures(engine.model, 32, 1024, args.repeats)
        stats = engine.stats()
    finally:
        engine.close()
        torch_engine.close()
    pool_tokens = (stats["kv_blocks_total"] + 1) * engine.config.kv_block_size
    kv_bytes_per_token = stats["kv_cache_bytes"] / pool_tokens
    result = {
        "benchmark": "engine",
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "device": args.device,
            "load_average_1min": os.getloadavg()[0],
        },
        "model": {
            "parameters": model.num_parameters(),
            "active_parameters": model.num_parameters(active=True),
        },
        "prompt_len": args.prompt_len,
        "new_tokens": args.new_tokens,
        "decode": decode,
        "bare_model_one_token_forward": floor,
        "prefill": prefill,
        "prefix_cache": prefix_cache,
        "abort": abort,
        "long_context": long_context,
        "memory": {
            "kv_cache_bytes": stats["kv_cache_bytes"],
            "kv_bytes_per_token": kv_bytes_per_token,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        },
    }
    print(
        f"prefill: engine {prefill['engine_tokens_per_s']:,.0f} tok/s, "
        f"HF forward {prefill['hf_forward_tokens_per_s']:,.0f} tok/s "
        f"({prefill['speedup_over_hf_forward']:.2f}x); "
        f"abort with {abort['batch']} running: {abort['abort_seconds_median'] * 1e3:.1f} ms median, "
        f"{abort['abort_seconds_max'] * 1e3:.1f} ms max "
        f"(one decode step {abort['decode_step_seconds'] * 1e3:.1f} ms)"
    )
    print(
        f"prefix cache: {prefix_cache['batch']} prompts of {prefix_cache['shared_tokens']} shared + "
        f"{prefix_cache['own_tokens']} own tokens: {prefix_cache['engine_tokens_per_s']:,.0f} prompt tok/s, "
        f"{prefix_cache['engine_without_cache_tokens_per_s']:,.0f} without the cache "
        f"({prefix_cache['speedup_over_engine_without_cache']:.2f}x)"
    )
    print(
        f"decode at {long_context['prompt_len']} tokens of context, batch {long_context['batch']}: "
        f"{long_context['decode_step_seconds_native'] * 1e3:.1f} ms a step reading the cache in place, "
        f"{long_context['decode_step_seconds_gather'] * 1e3:.1f} ms gathering it "
        f"({long_context['speedup']:.2f}x)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
