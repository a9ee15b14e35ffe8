"""The main job, `overture train CONFIG`: from nothing to a policy that fixes bugs better after RL.

Phases, each calling the component that owns it:

1. tasks — `job_tasks.load_task_set` (bundled repositories, synthesized once and cached, or a
   task file), split into train and held-out;
2. tokenizer — `setup.run_tokenizer`, as `pretrain` and `sft` do: saved as `RUN/tokenizer.json`
   with its record, read back from there on resume (refused when the config gives another) and by
   the sub-runs;
3. SFT — the oracle solves the train tasks (`job_tasks.write_oracle_demonstrations`); when
   `lm_warmup.steps` > 0, `overture.supervised.pretrain.pretrain` first trains next-token prediction on
   the frozen corpus overture ships, less the held-out repositories' source (`tasks.heldout_repos`: a
   held-out repository is code the model has never seen; the held-out functions of the other
   repositories are new bugs in code it has), and on every token of the demonstrations SFT
   trains on (the conversations' tool output included, which is where the copying a fix needs is
   seen most; their shared system message once, `warmup_documents`) and, with
   `lm_warmup.edit_drills`, on edit drills cut from their reads (`overture.recipes.main_job.drills`), and
   with `lm_warmup.repo_code_repeats` on more copies of the
   train repositories' library code (`warmup_documents.repo_code_documents`: code to know by
   heart, so that the fixed function can be written out), in the sub-run `RUN/lm-warmup/`; then
   `overture.supervised.sft.sft` trains on the demonstrations' assistant turns, from the warm-up's
   checkpoint when there is one, until the held-out loss stops improving (its own early
   stopping), in the sub-run `RUN/sft/`;
   RL starts from its best weights, and how exactly they reproduce the held-out demonstrations'
   tool calls is measured (`call_accuracy`: which arguments the model can write at all), and
   for it and the warm-up's checkpoint whether they copy at all (`copying`: random spans shown
   twice, `overture.recipes.main_job.copying`);
4. held-out pass@1 of that checkpoint (`evaluation.evaluate` through the engine); RL on the
   train tasks (`overture.recipes.main_job.rl_phase`) with the `Orchestrator` in the mode the `[rl]`
   section gives, a training checkpoint every `training.checkpoint_every` steps (and after the
   last), then the same evaluation again with the same sampling settings;
5. the summary (table on the console, JSON returned to the caller), with pass@1's change and
   its standard error paired by task (`evaluation.pass1_change`), and the same for pass@k and
   the behaviour RL should move — parallel turns, calls per turn, turns (of resolved episodes
   too), reads before the first edit, generated tokens (`behaviour_change`; also in
   metrics.jsonl and TensorBoard as `change/NAME` and `change_se/NAME`), and with several episodes
   a task how much of SFT's sharpening headroom (pass@k − pass@1) RL took (`sharpening`).

With `runtime.ray` (or `runtime.ray_address`) the RL phase's trainer, engine and rollout workers
run as Ray actors (`overture.orchestration.ray_actors`), driven by the same orchestrator; the trainer actor
writes the RL checkpoints, and the newest one hands the trained weights back to this process
for the evaluation after RL and the final checkpoint.

Each phase trains with its own optimizer: the warm-up with `[lm_warmup]`'s steps, windows, LR
and warmup, SFT with `[training]`'s, RL with `[rl]`'s steps, LR, warmup and final LR ratio (the
LR schedule of the RL trainer spans the RL steps, not the SFT ones); the rest of AdamW is
`[training]`'s (`RLConfig.optimizer`, `LMWarmupConfig.optimizer`). RL's rollouts sample at
`rl.temperature` when set (`RLConfig.sampling_temperature`); the evaluations at
`engine.temperature`.

Run directory `OUTPUT_DIR/NAME/`: `config.toml`, `metrics.jsonl` (the SFT summary, one record
per evaluation and per RL step, `phase` saying which), `tb/`, `checkpoints/` (RL training
checkpoints, `final/`), `trajectories/` (`rl-step-N.jsonl`, `eval-before.jsonl`,
`eval-after.jsonl`), `demonstrations.jsonl`, `lm-warmup/` (the warm-up sub-run), `sft/` (the
SFT sub-run, with its per-step metrics.jsonl, tb/ and checkpoints, `best/` among them) and
`job_state.json` (finished phases).

`--resume` (refused when the run's own `config.toml` has another `seed`, `[tasks]`,
`[tokenizer]` or `[model]`: `job_config.resume_conflicts`) skips the phases `job_state.json` records as
finished, runs an unfinished warm-up again from its start, resumes SFT from its own checkpoint,
and RL from the newest complete RL checkpoint: the optimizer step count, policy version and RL
totals come back from it, the records of later (lost) steps are removed from metrics.jsonl, and
the run trains the steps left. Rollouts in flight at the interruption are lost; the train-task
queue comes back from the checkpoint too (`TaskQueue.state`), so their tasks are dealt again
first and then the ones never dealt, in the order the interrupted run would have dealt them.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import torch

from overture.config import RunConfig, load_config
from overture.evaluation.held_out import evaluate, paired_changes, pass1_change
from overture.model import Transformer, load_pretrained, save_pretrained
from overture.orchestration.orchestrator import EngineHandle
from overture.orchestration.rollout_engine import open_rollout_engine
from overture.recipes.main_job.call_accuracy import call_argument_accuracy
from overture.recipes.main_job.copy_circuit import install_copy_circuit
from overture.recipes.main_job.copying import repeated_span_accuracy, statement_tokens
from overture.recipes.main_job.drills import edit_drills
from overture.recipes.main_job.job_config import (
    check_job_config,
    lm_warmup_phase_config,
    resume_conflicts,
    rl_mode,
    sft_phase_config,
)
from overture.recipes.main_job.job_display import JobDisplay
from overture.recipes.main_job.job_state import JobState
from overture.recipes.main_job.job_tasks import load_task_set, split_tasks, write_oracle_demonstrations
from overture.recipes.main_job.rl_phase import RL_COUNTS, RLPhase, rl_totals
from overture.recipes.main_job.warmup_documents import (
    heldout_repo_folders,
    lm_warmup_documents,
    repo_code_documents,
)
from overture.rl.checkpoints import latest_checkpoint, load_checkpoint
from overture.rl.run_dir import RunDir, RunDirError, read_metrics
from overture.rl.setup import run_tokenizer
from overture.rl.trainer import rl_trainer
from overture.runtime.devices import resolve_device
from overture.supervised.demonstrations import read_demonstrations
from overture.supervised.pretrain import LMPhase, pretrain
from overture.supervised.sft import sft, split_held_out
from overture.tasks import Task
from overture.tasks.spec import write_jsonl
from overture.text import Tokenizer


def _drop_records_after(run_path: Path, step: int) -> None:
    """Remove RL records past `step` (lost with the interruption; they are trained again)."""
    file = run_path / "metrics.jsonl"
    if not file.is_file():
        return
    kept = [r for r in read_metrics(file) if not (r.get("phase") == "rl" and r["step"] > step)]
    write_jsonl(file, kept)


class MainJob:
    """One run of the main job (see the module docstring); `run()` returns the summary."""

    def __init__(
        self,
        config: RunConfig,
        overwrite: bool = False,
        resume: bool = False,
        display: JobDisplay | None = None,
        stop_after_rl_step: int | None = None,
    ) -> None:
        """`stop_after_rl_step` ends the run after that RL step and its checkpoint, as a preempted
        job would (for resume tests); `resume` later continues it."""
        check_job_config(config)
        run_path = Path(config.output_dir) / config.name
        if resume and not run_path.is_dir():
            raise RunDirError(f"{run_path}: no run to resume")
        saved = run_path / "config.toml"
        if resume and saved.is_file() and (conflicts := resume_conflicts(load_config(saved), config)):
            raise RunDirError(
                f"{run_path}: cannot resume under other settings than the run's own "
                f"({'; '.join(conflicts)}); resume with `overture train {saved} --resume`"
            )
        self.config, self.resume, self.stop_after = config, resume, stop_after_rl_step
        self.display = display or JobDisplay()
        self.started = time.time()
        if resume:
            restored = latest_checkpoint(Path(config.output_dir) / config.name / "checkpoints")
            _drop_records_after(Path(config.output_dir) / config.name, self._batches_in(restored))
        self.run_dir = RunDir(config, overwrite=overwrite, resume=resume)
        self.state = JobState(self.run_dir.path, fresh=not resume)

    @staticmethod
    def _batches_in(checkpoint: Path | None) -> int:
        if checkpoint is None:
            return 0
        return json.loads((checkpoint / "state.json").read_text())["extra"]["batches"]

    def _timed(self, phase: str, began: float) -> None:
        self.state.add_seconds(phase, time.time() - began)

    def _tokenizer(self) -> Tokenizer:
        """The job's tokenizer, saved in the run directory when the job starts and read back from
        there on resume (refused when the config now gives another: `setup.run_tokenizer`). The
        sub-runs read it from there too."""
        return run_tokenizer(self.config, self.run_dir.path, self.resume)

    # ------------------------------------------------------------------ phases

    def run(self) -> dict[str, Any]:
        config, display = self.config, self.display
        torch.manual_seed(config.seed)
        device = resolve_device(config.runtime)
        tokenizer = self._tokenizer()
        display.phase("tasks")
        began = time.time()
        tasks, source = asyncio.run(load_task_set(config, display.echo))
        train_tasks, heldout = split_tasks(tasks, config)
        check_job_config(config, train_tasks)
        task_info = {
            "source": str(source.path),
            "cached": source.cached,
            "train": len(train_tasks),
            "heldout": len(heldout),
            "rl": len(train_tasks),
        }
        display.echo(f"tasks: {len(train_tasks)} train, {len(heldout)} held out ({source.path})")
        self._timed("tasks", began)
        sft_summary = self.state.get("sft") or self._sft(train_tasks, tokenizer)
        weights = Path(sft_summary["best"] or sft_summary["final"])
        dtype = getattr(torch, config.training.dtype)
        if (nproc := config.parallel.nproc) > 1 and not config.runtime.uses_ray:
            # In process the RL trainer is one process; on Ray it is sharded over nproc rank actors.
            display.echo(f"RL phase: one trainer process (parallel.nproc = {nproc} applies to SFT; "
                         "runtime.ray shards the RL trainer too)")  # fmt: skip
        trainer = rl_trainer(load_pretrained(weights, dtype=dtype).to(device), config)
        restored = latest_checkpoint(self.run_dir.checkpoints) if self.resume else None
        totals = rl_totals({})
        task_queue: dict[str, Any] | None = None
        if restored is not None:
            extra = load_checkpoint(trainer, restored).extra
            totals, task_queue = rl_totals(extra["totals"]), extra.get("task_queue")
            display.echo(
                f"resumed RL from {restored} (step {trainer.step}, version {trainer.policy_version})"
            )
        served = restored / "model" if restored is not None else weights
        with open_rollout_engine(
            config, served, tokenizer, version=trainer.policy_version, device=device, dtype=dtype,
            log_dir=self.run_dir.path,
        ) as engine:  # fmt: skip
            before = self.state.get("eval_before")
            if before is None:
                if restored is not None:
                    raise RunDirError(f"{self.run_dir.path}: RL checkpoints but no evaluation before RL")
                before = self._evaluate("before", engine, heldout, tokenizer)
            rl = RLPhase(config, self.run_dir, self.state, display, self.stop_after)
            totals = rl.run(trainer, engine, train_tasks, tokenizer, totals, task_queue, weights, restored)
            if totals["batches"] < config.rl.steps:
                return self._interrupted(totals)
            after = self.state.get("eval_after") or self._evaluate("after", engine, heldout, tokenizer)
        final = self.run_dir.checkpoints / "final"
        trainer.save_weights(final)
        tokenizer.save(final)
        summary = self._summary(task_info, sft_summary, before, after, totals, final)
        self._log_changes(trainer.policy_version, summary["behaviour_change"])
        self.run_dir.close()
        display.summary(summary)
        return summary

    def _sft(self, train_tasks: list[Task], tokenizer: Tokenizer) -> dict[str, Any]:
        self.display.phase("oracle demonstrations")
        began = time.time()
        demos = self.run_dir.path / "demonstrations.jsonl"
        counts = self.state.get("demonstrations")
        if counts is None or not demos.is_file():
            counts = asyncio.run(
                write_oracle_demonstrations(train_tasks, tokenizer, self.config, demos, self.display.echo)
            )
            self.state.record("demonstrations", counts)
        self._timed("demonstrations", began)
        start = self._initial_weights()
        if self.config.lm_warmup.steps:
            warmed = self.state.get("lm_warmup") or self._lm_warmup(demos, tokenizer, start)
            start = Path(warmed["checkpoint"])
        sft_config = sft_phase_config(self.config, self.run_dir.path, demos, start)
        self.display.phase("SFT on oracle demonstrations")
        began = time.time()
        summary = sft(sft_config, resume=self.resume, echo=self.display.echo)
        summary.update(counts)
        best = Path(summary["best"] or summary["final"])
        _, held_out = self._sft_split(demos)
        model = self._load(best)
        summary["call_accuracy"] = self._call_accuracy(model, tokenizer, held_out)
        summary["copying"] = self._copying(model, tokenizer, held_out)
        self.run_dir.log(0, phase="sft", **{k: v for k, v in summary.items() if not isinstance(v, str)})
        self._timed("sft", began)
        return self.state.record("sft", summary)

    def _sft_split(self, demos: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The demonstration records SFT trains on and those it holds out, split as SFT splits them."""
        return split_held_out(read_demonstrations(demos), self.config.sft.val_fraction)

    def _initial_weights(self) -> Path | None:
        """Where the job's first phase starts when the config names no checkpoint: fresh weights
        drawn from the seed, with the induction circuit of `copy_circuit` when
        `main_job.copy_circuit` asks for it, saved once as `RUN/init/`; None with `model.path`."""
        if self.config.model.path:
            return None
        init = self.run_dir.path / "init"
        if not (init / "config.json").is_file():
            torch.manual_seed(self.config.seed)
            model = Transformer(self.config.model)
            if self.config.main_job.copy_circuit:
                install_copy_circuit(model)
            save_pretrained(model.to(getattr(torch, self.config.training.dtype)), init)
        return init

    def _load(self, weights: Path) -> Transformer:
        """A checkpoint's weights, in the run's training dtype, to measure on the CPU."""
        return load_pretrained(weights, dtype=getattr(torch, self.config.training.dtype))

    def _call_accuracy(
        self, model: Transformer, tokenizer: Tokenizer, held_out: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """How exactly the SFT checkpoint reproduces the calls of the demonstrations SFT held out
        (teacher-forced, greedy): which arguments it can write before any task is solved."""
        accuracy = call_argument_accuracy(model, tokenizer, held_out)
        shares = ", ".join(f"{name} {value['exact']:.2f}" for name, value in accuracy.items())
        self.display.echo(f"held-out calls reproduced exactly (teacher-forced): {shares}")
        return accuracy

    def _copying(
        self, model: Transformer, tokenizer: Tokenizer, held_out: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Whether a checkpoint copies at all (`overture.recipes.main_job.copying`): spans of the held-out
        demonstrations' statement tokens, shown twice."""
        copying = repeated_span_accuracy(model, statement_tokens(tokenizer, held_out), seed=self.config.seed)
        self.display.echo(
            f"repeated spans copied (greedy): first showing {copying['first_showing']:.3f}, "
            f"second {copying['second_showing']:.3f}"
        )
        return copying

    def _lm_warmup(self, demos: Path, tokenizer: Tokenizer, start: Path | None) -> dict[str, Any]:
        """Next-token training on the shipped corpus, on every token of the demonstrations SFT
        will train on (not those it holds out to stop on) and on the edit drills cut from them,
        from `start` (the job's initial weights); an interrupted warm-up starts again."""
        self.display.phase(f"language-model warm-up ({self.config.lm_warmup.steps} steps)")
        began = time.time()
        records, held_out = self._sft_split(demos)
        per_listing = self.config.lm_warmup.edit_drills  # 0: none, and none are built
        drills = [drill for record in records for drill in edit_drills(record, per_listing)]
        self.display.echo(f"warm-up documents: {len(records)} demonstrations, {len(drills)} edit drills")
        documents = lm_warmup_documents(tokenizer, records, drills)
        config = lm_warmup_phase_config(self.config, self.run_dir.path, start)
        unseen = heldout_repo_folders(self.config)
        repo_code = repo_code_documents(tokenizer, self.config)
        if repo_code:
            repeats = self.config.lm_warmup.repo_code_repeats
            self.display.echo(f"warm-up: the repositories' library code {repeats} more times")
        summary = pretrain(
            config,
            overwrite=True,
            echo=self.display.echo,
            documents=documents,
            corpus_exclude=unseen,
            train_documents=repo_code,
            phase=LMPhase.of_warmup(self.config.lm_warmup, self.config.training),
        )
        summary["edit_drills"] = len(drills)
        summary["copying"] = self._copying(self._load(Path(summary["checkpoint"])), tokenizer, held_out)
        record = {k: v for k, v in summary.items() if k != "sample"}
        self.run_dir.log(0, phase="lm_warmup", **{k: v for k, v in record.items() if not isinstance(v, str)})
        self._timed("lm_warmup", began)
        return self.state.record("lm_warmup", record)

    def _evaluate(
        self, label: str, engine: EngineHandle, tasks: list[Task], tokenizer: Tokenizer
    ) -> dict[str, Any]:
        config = self.config
        self.display.phase(f"held-out evaluation {label} RL (version {engine.version})")
        began = time.time()
        samples = config.rl.eval_samples
        policy = engine.policy()
        sections = (config.agent, config.sandbox, config.tasks)
        with self.display.evaluation(f"eval {label}", len(tasks) * samples) as seen:
            report, trajectories = asyncio.run(
                evaluate(tasks, policy, tokenizer, *sections, samples, sorted({1, samples}), progress=seen)
            )
        write_jsonl(
            self.run_dir.path / "trajectories" / f"eval-{label}.jsonl", [t.to_dict() for t in trajectories]
        )
        result = report.to_dict()
        flat = {**result["pass_at"], **result["metrics"], "statuses": result["statuses"]}
        self.run_dir.log(engine.version, phase="eval", when=label, version=engine.version, **flat)
        by_repo = ", ".join(f"{repo} {value:.3f}" for repo, value in report.pass1_by_repo.items())
        pass1 = report.pass_at[1]
        self.display.echo(f"held-out pass@1 {label} RL: {pass1:.3f} on {len(tasks)} tasks ({by_repo})")
        self._timed(f"eval_{label}", began)
        return self.state.record(f"eval_{label}", result)

    # ------------------------------------------------------------------ endings

    def _log_changes(self, version: int, changes: dict[str, dict[str, float]]) -> None:
        """Each measure's paired change from SFT to RL, with its standard error, in metrics.jsonl
        and TensorBoard (`change/NAME`, `change_se/NAME`)."""
        record: dict[str, float] = {}
        for name, paired in changes.items():
            record[f"change/{name}"] = paired["change"]
            record[f"change_se/{name}"] = paired["standard_error"]
        if record:
            self.run_dir.log(version, phase="behaviour_change", **record)

    def _interrupted(self, totals: dict[str, Any]) -> dict[str, Any]:
        self.run_dir.close()
        self.display.echo(
            f"stopped after RL step {totals['batches']} of {self.config.rl.steps}; --resume continues"
        )
        return {
            "run_dir": str(self.run_dir.path),
            "stopped_after_rl_step": totals["batches"],
            "optimizer_steps": totals["optimizer_steps"],
        }

    def _summary(
        self,
        tasks: dict[str, Any],
        sft_summary: dict[str, Any],
        before: dict[str, Any],
        after: dict[str, Any],
        totals: dict[str, Any],
        final: Path,
    ) -> dict[str, Any]:
        rewards = totals["rewards"] or [0.0]
        drop = ("resolved", "by_task")
        change, standard_error = pass1_change(
            before["resolved"], before["samples"], after["resolved"], after["samples"]
        )
        return {
            "run_dir": str(self.run_dir.path),
            "tasks": tasks,
            "lm_warmup": {
                key: (self.state.get("lm_warmup") or {}).get(key)
                for key in ("steps", "edit_drills", "initial_val_loss", "final_val_loss", "copying")
            },
            "sft": {
                key: sft_summary.get(key)
                for key in (
                    "steps",
                    "stopped_early",
                    "initial_val_loss",
                    "best_val_loss",
                    "best_step",
                    "best",
                    "demonstrations",
                    "oracle_failed",
                    "parallel_demonstrations",
                    "call_accuracy",
                    "copying",
                )
            },
            "eval_before": {k: v for k, v in before.items() if k not in drop},
            "eval_after": {k: v for k, v in after.items() if k not in drop},
            "pass@1_before": before["pass_at"]["pass@1"],
            "pass@1_after": after["pass_at"]["pass@1"],
            "pass@1_change": {"change": change, "standard_error": standard_error},
            "behaviour_change": behaviour_change(before, after),
            "sharpening": sharpening(before, after),
            "rl": {
                "mode": rl_mode(self.config),
                "steps": totals["batches"],
                "optimizer_steps": totals["optimizer_steps"],
                "reward_first": rewards[0],
                "reward_last": rewards[-1],
                **{key: totals[key] for key in ("max_staleness", *RL_COUNTS)},
            },
            "final_checkpoint": str(final),
            "phase_seconds": self.state.get("seconds") or {},
            "wall_s": round(time.time() - self.started, 1),
        }


def behaviour_change(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every paired measure's change from the evaluation before RL to the one after
    (`evaluation.paired_changes`); {} for a run whose evaluation before RL predates them."""
    if "by_task" not in before or "by_task" not in after:
        return {}
    return paired_changes(before["by_task"], after["by_task"])


def sharpening(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """How much of the SFT policy's sharpening headroom RL took. With k episodes a task, pass@k
    before RL less pass@1 before RL is what making the tasks SFT solves sometimes reliable could add
    to pass@1; `captured` is pass@1's change over it (None without headroom). {} under two episodes
    a task, where there is no pass@k to measure it by."""
    k = before["samples"]
    if k < 2:
        return {}
    pass1 = before["pass_at"]["pass@1"]
    headroom = before["pass_at"][f"pass@{k}"] - pass1
    change = after["pass_at"]["pass@1"] - pass1
    return {"k": k, "headroom": headroom, "pass@1_change": change,
            "captured": change / headroom if headroom > 0 else None}  # fmt: skip


def train(
    config: RunConfig,
    overwrite: bool = False,
    resume: bool = False,
    display: JobDisplay | None = None,
    stop_after_rl_step: int | None = None,
) -> dict[str, Any]:
    """Run (or resume) the main job; returns its summary (see `MainJob`)."""
    return MainJob(config, overwrite, resume, display, stop_after_rl_step).run()
