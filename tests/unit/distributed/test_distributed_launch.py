"""The training commands on several processes: `overture sft --set parallel.nproc=2`, the same
under a Ray launch, a checkpoint written by 2 processes resumed by 1, and the RL step of a
sharded `Trainer`, each compared with one process on the same data.

One run of each kind, shared through module fixtures (every 2-process run costs a few seconds
of process start-up). The router's auxiliary loss coefficient is 0 in these configs: the trainer
computes that loss per micro-batch, and 2 ranks lay out other micro-batches than one process, so
with it the results would differ by design (`lm_train_step`'s global aux loss is tested in
test_distributed_training.py). The balancing bias is on, so the all-reduced router loads are
part of what must agree.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import tiny_model_config
from typer.testing import CliRunner
from weight_helpers import assert_state_dicts_match

from overture.cli.main import app
from overture.config import RunConfig, save_config
from overture.config.schema import ParallelConfig
from overture.distributed import build_meshes, spawn
from overture.model import Transformer, load_pretrained
from overture.rl.batching import build_micro_batches
from overture.rl.logprobs import token_logprobs
from overture.rl.run_dir import read_metrics
from overture.rl.samples import TrainingSample
from overture.rl.trainer import Trainer, rl_trainer
from overture.supervised.demonstrations import synthetic_demonstrations
from overture.supervised.pretrain import pretrain
from overture.supervised.sft import sft
from overture.text import Tokenizer
from overture.text.tokenizer import TOKENIZER_FILE

VOCAB = 1024
STEPS = 4
# Float tolerance, as in test_distributed_training.py: sums in another order, and AdamW's
# normalised steps carry rounding differences of tiny gradients on to the next step.
RTOL = 1e-4
TOLERANCE = dict(rtol=RTOL, atol=1e-5)
# Weights after AdamW steps: an element whose gradient is near zero moves by m/√v, where the
# rounding noise of the sums is not small against its gradient; a few such elements may differ
# by a share of the learning rate (1e-2 in every run here, at most STEPS optimizer steps). The
# pretraining corpus is the package's own source, so which element that is changes with every
# edit of the code.
WEIGHT_TOLERANCE = dict(rtol=RTOL, atol=1e-4, lr=1e-2, steps=STEPS)
MODEL = tiny_model_config(
    vocab_size=VOCAB, router_aux_loss_coef=0.0, balance_bias=True, balance_bias_rate=0.01
)


MODEL_KEYS = Transformer(MODEL).state_dict().keys()


def fixed_tokenizer(root: Path) -> str:
    """A tokenizer trained on synthetic demonstrations, once per folder. The default one is trained
    on the package's source, so every edit of the code changed these runs' token ids, and with
    them which near-ties of top-k routing the two layouts break apart: the balancing bias moves by
    the sign of each expert's load, so one flipped tie moved every element of it."""
    folder = root / "tokenizer"
    if not (folder / TOKENIZER_FILE).is_file():
        texts = [json.dumps(record["messages"]) for record in synthetic_demonstrations(64, seed=0)]
        Tokenizer.train(texts, vocab_size=VOCAB, min_frequency=1).save(folder)
    return str(folder)


def sft_config(tmp_path: Path, name: str, **sections: dict) -> RunConfig:
    data = {
        "name": name,
        "output_dir": str(tmp_path),
        "seed": 1,
        "model": MODEL.model_dump(),
        "tokenizer": {"vocab_size": VOCAB, "path": fixed_tokenizer(tmp_path)},
        # 5 demonstrations a step: 3 on one rank, 2 on the other; small micro-batches, so the
        # ranks run different numbers of them (the shorter one pads).
        "training": {
            "steps": STEPS,
            "batch_size": 5,
            "seq_len": 512,
            "lr": 1e-2,
            "warmup_steps": 1,
            "log_every": 1,
            "checkpoint_every": 2,
            "micro_batch_tokens": 600,
        },
        "sft": {"synthetic_count": 12, "val_fraction": 0.25, "eval_every": 2, "patience": 5},
        "runtime": {"device": "cpu"},
    }
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    return RunConfig.model_validate(data)


def quiet(_: str) -> None:
    pass


def step_values(run_dir: str | Path, key: str) -> dict[int, float]:
    return {r["step"]: r[key] for r in read_metrics(run_dir) if key in r}


def final_weights(summary: dict) -> dict[str, torch.Tensor]:
    return load_pretrained(summary["final"]).state_dict()


def assert_same_weights(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert_state_dicts_match(got, expected, **WEIGHT_TOLERANCE)


# --- SFT ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("launch")


@pytest.fixture(scope="module")
def one_process(root) -> dict:
    return sft(sft_config(root, "one"), echo=quiet)


@pytest.fixture(scope="module")
def two_processes(root) -> tuple[dict, str]:
    """`overture sft` through the CLI with parallel.nproc=2: (summary, everything it printed)."""
    path = root / "two.toml"
    save_config(sft_config(root, "two"), path)
    result = CliRunner().invoke(app, ["sft", str(path), "--set", "parallel.nproc=2"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), result.output


@pytest.fixture(scope="module")
def ray_resumed(root, one_process) -> tuple[dict, Path, int]:
    """The one-process run's step-2 checkpoint resumed by 2 Ray actors, stopped after step 3 with
    a checkpoint, as a preempted job would be: (summary, run directory, metrics records before)."""
    run_dir = root / "ray"
    shutil.copytree(one_process["run_dir"], run_dir)
    for later in ("step-00000004", "best", "final"):
        shutil.rmtree(run_dir / "checkpoints" / later)
    before = len(read_metrics(run_dir))
    config = sft_config(root, "ray", parallel={"nproc": 2}, runtime={"device": "cpu", "ray": True})
    return sft(config, resume=True, until_step=3, echo=quiet), run_dir, before


def test_sft_on_2_processes_gives_the_losses_and_weights_of_one(one_process, two_processes):
    two, printed = two_processes
    for key in ("loss", "val_loss", "grad_norm"):
        expected = step_values(one_process["run_dir"], key)
        assert len(expected) >= 2
        assert step_values(two["run_dir"], key) == pytest.approx(expected, rel=RTOL), key
    assert two["steps"] == STEPS and two["best_step"] == one_process["best_step"]
    assert_same_weights(final_weights(two), final_weights(one_process))
    # Rank 0's progress lines came back to the command's console, once each.
    assert printed.count("cpu x 2 processes") == 1 and printed.count("step     4") == 1
    assert (Path(two["final"]) / "tokenizer.json").is_file()


def test_checkpoints_resume_across_layouts_and_under_ray_as_one_process_would(root, one_process, ray_resumed):
    expected = step_values(one_process["run_dir"], "loss")
    # 1 process -> 2 Ray actors: weights, AdamW state and data position sharded on load.
    summary, run_dir, before = ray_resumed
    assert summary["steps"] == 3 and summary["final"] is None
    assert Path(summary["checkpoint"]).name == "step-00000003"
    (step_3,) = [r for r in read_metrics(run_dir)[before:] if "loss" in r]
    assert step_3["step"] == 3 and step_3["loss"] == pytest.approx(expected[3], rel=RTOL)
    # 2 Ray actors -> 1 process: what they wrote is a plain checkpoint of the whole model.
    assert load_pretrained(Path(summary["checkpoint"]) / "model").state_dict().keys() == MODEL_KEYS
    resumed = sft(sft_config(root, "ray"), resume=True, echo=quiet)
    assert resumed["steps"] == STEPS and resumed["final"] is not None
    (step_4,) = [r for r in read_metrics(run_dir)[before + 1 :] if "loss" in r]
    assert step_4["step"] == 4 and step_4["loss"] == pytest.approx(expected[4], rel=RTOL)
    assert resumed["best_val_loss"] == pytest.approx(one_process["best_val_loss"], rel=RTOL)
    assert_same_weights(final_weights(resumed), final_weights(one_process))


def test_bad_parallel_settings_and_rank_errors_reach_the_command_as_themselves(root):
    path = root / "bad.toml"
    save_config(sft_config(root, "bad"), path)
    runner = CliRunner()
    bf16 = runner.invoke(
        app, ["sft", str(path), "--set", "parallel.nproc=2", "--set", "training.dtype='bfloat16'"]
    )
    assert bf16.exit_code == 2 and "training.dtype = 'bfloat16' with parallel.nproc = 2" in bf16.output
    # Raised inside both ranks (the data is read there), re-raised here as the same error.
    missing = runner.invoke(
        app, ["sft", str(path), "--set", "parallel.nproc=2", "--set", "sft.data='nowhere.jsonl'"]
    )
    assert missing.exit_code == 2 and "nowhere.jsonl: demonstrations file not found" in missing.output


# --- LM warm-up -----------------------------------------------------------------------------


def test_pretrain_on_2_processes_gives_the_losses_and_weights_of_one(root):
    # Here the aux loss is on: this loop computes it from the loads of the whole batch.
    model = tiny_model_config(vocab_size=512, router_aux_loss_coef=0.05, balance_bias=True).model_dump()
    training = {"steps": 2, "batch_size": 4, "seq_len": 16, "lr": 1e-2, "warmup_steps": 1, "log_every": 1}

    def run(name: str, nproc: int) -> dict:
        config = RunConfig.model_validate(
            {
                "name": name,
                "output_dir": str(root),
                "model": model,
                "tokenizer": {"vocab_size": 512},
                "training": training,
                "parallel": {"nproc": nproc},
            }
        )
        return pretrain(config, echo=quiet)

    one, two = run("lm-one", 1), run("lm-two", 2)
    for key in ("loss", "aux_loss", "grad_norm", "expert_load_cv", "val_loss"):
        expected = step_values(one["run_dir"], key)
        assert step_values(two["run_dir"], key) == pytest.approx(expected, rel=RTOL), key
    assert two["reload_max_logit_difference"] == 0.0
    checkpoint_weights = [load_pretrained(summary["checkpoint"]).state_dict() for summary in (two, one)]
    assert_same_weights(*checkpoint_weights)


# --- RL -------------------------------------------------------------------------------------

RL_PARALLEL = ParallelConfig(nproc=2, ep=2)  # experts split over the 2 ranks, dense layers sharded


def rl_config() -> RunConfig:
    return RunConfig.model_validate(
        {
            "model": MODEL.model_dump(),
            "training": {"lr": 1e-2, "warmup_steps": 0, "micro_batch_tokens": 24, "grad_clip": 0.5},
            # Two optimizer steps per batch with recomputed proximal logprobs, a KL reference and
            # the per-sequence mean: weights that depend on the whole batch.
            "rl": {"minibatches": 2, "kl_coef": 0.05, "loss_agg": "seq_mean_token_mean"},
        }
    )


def rl_samples(model: Transformer) -> list[TrainingSample]:
    """7 sequences of 6 to 18 tokens, behavior logprobs near (not at) the model's own."""
    rng = random.Random(5)
    samples = []
    # In eval mode: a forward in training mode would count router loads into the balancing bias.
    model.eval()
    for index in range(7):
        length = rng.randint(6, 18)
        ids = [rng.randrange(3, VOCAB) for _ in range(length)]
        mask = [0] * 3 + [1] * (length - 3)
        (batch,) = build_micro_batches([TrainingSample(ids, mask)], [1.0], token_budget=10_000)
        with torch.no_grad():
            own = token_logprobs(model(batch.input_ids).logits, batch.targets)[0].tolist()
        behavior = [0.0, *(lp + rng.uniform(-0.3, 0.3) for lp in own)]
        versions = [0] * 3 + [rng.choice([0, 1])] * (length - 3)
        samples.append(TrainingSample(ids, mask, behavior, versions, rng.uniform(-1, 1), f"s{index}"))
    model.train()
    return samples


def rl_steps(trainer: Trainer, samples: list[TrainingSample]) -> tuple[list[dict], dict[str, torch.Tensor]]:
    metrics = [trainer.rl_step(samples), trainer.rl_step(samples[::-1])]
    return metrics, trainer.export_weights()


def rl_worker(
    parallel: ParallelConfig, state: dict[str, torch.Tensor], samples: list[TrainingSample]
) -> dict:
    model = Transformer(MODEL)
    model.load_state_dict(state)
    metrics, weights = rl_steps(rl_trainer(model, rl_config(), meshes=build_meshes(parallel)), samples)
    return {"metrics": metrics, "weights": weights if dist.get_rank() == 0 else None}


def test_rl_step_on_2_processes_with_expert_parallelism_equals_one_process():
    torch.manual_seed(4)
    model = Transformer(MODEL)
    state = {name: value.clone() for name, value in model.state_dict().items()}
    samples = rl_samples(model)
    ranks = spawn(rl_worker, RL_PARALLEL, RL_PARALLEL, state, samples, device_type="cpu")
    expected_metrics, expected_weights = rl_steps(rl_trainer(model, rl_config()), samples)
    assert expected_metrics[0]["grad_norm"] > 0.5  # clipping is part of what must agree
    assert expected_metrics[0]["is_weight_max"] > 1.0 and expected_metrics[0]["kl"] > 0
    for rank in ranks:  # every rank reports the global figures
        for got, expected in zip(rank["metrics"], expected_metrics, strict=True):
            # The aux loss metric is per micro-batch (see the module docstring); speed is speed.
            keys = sorted(set(expected) - {"aux_loss", "tokens_per_s"})
            assert sorted(set(got) - {"aux_loss", "tokens_per_s"}) == keys
            torch.testing.assert_close([got[k] for k in keys], [expected[k] for k in keys], **TOLERANCE)
    assert_same_weights(ranks[0]["weights"], expected_weights)
