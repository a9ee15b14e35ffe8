"""The main job, `overture train`: its pieces (phase configs, task cache and splits, job state,
configuration errors), and `configs/smoke.toml` end to end through the CLI: tasks synthesized
from the bundled repositories, oracle demonstrations, SFT, held-out pass@1, two async+partial RL
steps with real sandboxes, pass@1 again, in process and on Ray (SFT and the RL trainer over two
rank actors); then
runs stopped after one RL step (by the API, and by `kill -9` of the training program) and
resumed with `--resume`, with no optimizer step lost or repeated."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import ConfigError, RunConfig, load_config
from overture.engine.vllm_server import default_python
from overture.evaluation.held_out import PAIRED_MEASURES
from overture.model import Transformer, load_pretrained
from overture.recipes.main_job import job_tasks, rl_phase
from overture.recipes.main_job.job import _drop_records_after, train
from overture.recipes.main_job.job_config import (
    check_job_config,
    lm_warmup_phase_config,
    resume_conflicts,
    rl_mode,
    sft_phase_config,
)
from overture.recipes.main_job.job_state import JobState
from overture.recipes.main_job.job_tasks import TASK_FILE, builtin_cache_dir, load_task_set, split_tasks
from overture.recipes.main_job.warmup_documents import (
    heldout_repo_folders,
    lm_warmup_documents,
    repo_code_documents,
)
from overture.rl.checkpoints import complete_checkpoints
from overture.rl.run_dir import RunDir, read_metrics
from overture.rl.trainer import rl_trainer
from overture.supervised.demonstrations import render_demonstration
from overture.supervised.pretrain import LMPhase, corpus_tokens
from overture.tasks import REPOS_FOLDER, Task, TaskError, bundled_repo, bundled_repos, read_tasks, write_tasks
from overture.text import Tokenizer, corpus_texts
from overture.text.corpus import corpus_documents

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "smoke.toml"
runner = CliRunner()


def smoke_config(output_dir: Path, *overrides: str) -> RunConfig:
    return load_config(SMOKE, [f"output_dir={output_dir}", *overrides])


def make_tasks(train: int, heldout: int) -> list[Task]:
    return [
        Task(
            f"t{i}", "repo", "fix it", ["tests/test_x.py::test_x"], split="train" if i < train else "heldout"
        )
        for i in range(train + heldout)
    ]


# ----------------------------------------------------------------------------- fast: the pieces


def test_the_rl_trainer_takes_its_steps_and_schedule_from_the_rl_section(tmp_path):
    config = smoke_config(tmp_path, "rl.steps=7", "rl.lr=0.0005", "rl.warmup_steps=2", "rl.temperature=0.9")
    trainer = rl_trainer(Transformer(config.model), config)
    schedule = trainer.optimizer_config
    assert (schedule.steps, schedule.lr, schedule.warmup_steps) == (7, 0.0005, 2)
    assert schedule.min_lr_ratio == config.training.min_lr_ratio  # unless rl.min_lr_ratio sets one
    assert trainer.rl == config.rl and trainer.training == config.training
    # RL may sample hotter than the evaluations: the trainer scores at RL's temperature.
    assert trainer.sampling_temperature == 0.9 and config.engine.temperature != 0.9
    assert config.training.steps == 4 and config.training.lr != 0.0005  # SFT's settings untouched
    assert trainer.optimizer.param_groups[0]["lr"] == 0.0005


def test_sft_runs_as_a_sub_run_on_the_demonstrations(tmp_path):
    config = smoke_config(tmp_path)
    sub = sft_phase_config(config, tmp_path / "smoke", tmp_path / "smoke" / "demos.jsonl")
    assert Path(sub.output_dir) / sub.name == tmp_path / "smoke" / "sft"
    assert sub.sft.data == str(tmp_path / "smoke" / "demos.jsonl")
    assert sub.training == config.training


def test_the_lm_warmup_runs_as_a_sub_run_and_sft_starts_from_it(tmp_path):
    config = smoke_config(tmp_path, "lm_warmup.steps=5", "lm_warmup.seq_len=32", "lm_warmup.lr=0.01")
    warmup = lm_warmup_phase_config(config, tmp_path / "smoke")
    assert Path(warmup.output_dir) / warmup.name == tmp_path / "smoke" / "lm-warmup"
    assert warmup.training == config.training and warmup.model == config.model  # nothing rewritten
    phase = LMPhase.of_warmup(warmup.lm_warmup, warmup.training)
    assert (phase.optimizer.steps, phase.batch_size, phase.seq_len, phase.optimizer.lr) == (5, 2, 32, 0.01)
    unset_lr = RunConfig.model_validate({"lm_warmup": {"steps": 1}})
    assert LMPhase.of_warmup(unset_lr.lm_warmup, unset_lr.training).optimizer.lr == unset_lr.training.lr
    start = tmp_path / "smoke" / "lm-warmup" / "checkpoints" / "final"
    sft = sft_phase_config(config, tmp_path / "smoke", tmp_path / "demos.jsonl", start)
    assert sft.model.path == str(start) and sft.training == config.training
    assert warmup.tokenizer.path == sft.tokenizer.path == str(tmp_path / "smoke")  # the job's own


def test_the_warmup_corpus_never_holds_a_heldout_repository():
    config = load_config(REPO / "configs" / "tiny.toml", ['tasks.heldout_repos=["statbox"]'])
    assert heldout_repo_folders(config) == [f"{REPOS_FOLDER}/statbox"]
    corpus = corpus_texts(config.tokenizer.corpus, heldout_repo_folders(config))
    statbox = [path.read_text() for path in bundled_repo("statbox").rglob("*.py")]
    assert statbox and not any(text in corpus for text in statbox)
    ledger = [d.text for d in corpus_documents() if d.path.startswith(f"{REPOS_FOLDER}/ledger/")]
    assert ledger and all(text in corpus for text in ledger)  # train repositories stay


def test_the_warmup_corpus_appends_the_demonstrations_tokens_and_holds_out_every_tenth():
    tokenizer = Tokenizer.train(["def add(a, b):\n    return a + b\n"] * 4, vocab_size=300)
    texts = ["def add(a, b):", "return a + b"]
    documents = [[100 + i, 200 + i] for i in range(10)]
    splits = corpus_tokens(tokenizer, texts, hold_out_every=4, documents=documents)
    end = tokenizer.endoftext_id
    encoded = [tokenizer.encode(text) for text in texts] + documents
    held = [i for i in range(len(encoded)) if i % 4 == 3]  # the 4th and 8th documents, and so on
    assert splits.val.tolist() == [t for i in held for t in [*encoded[i], end]]
    assert splits.train.tolist() == [t for i, ids in enumerate(encoded) if i not in held for t in [*ids, end]]


def test_the_warmup_repeats_the_train_repositories_library_code_in_its_training_split_only():
    tokenizer = Tokenizer.train(["def add(a, b):\n    return a + b\n"] * 4, vocab_size=300)
    repeated = [[7, 8], [9]]
    splits = corpus_tokens(tokenizer, ["def add(a, b):"], hold_out_every=1, train_only=repeated)
    end = tokenizer.endoftext_id
    assert splits.val.tolist() == [*tokenizer.encode("def add(a, b):"), end]
    assert splits.train.tolist() == [7, 8, end, 9, end]

    config = load_config(
        REPO / "configs" / "tiny.toml", ["lm_warmup.repo_code_repeats=2", 'tasks.heldout_repos=["statbox"]']
    )
    documents = repo_code_documents(tokenizer, config)
    library = [
        tokenizer.encode(path.read_text())
        for repo in bundled_repos()
        if repo.name not in config.tasks.heldout_repos
        for path in sorted(repo.rglob("*.py"))
        if "tests" not in path.relative_to(repo).parts
    ]
    assert library and sorted(documents) == sorted(library * 2)  # no tests, no held-out repository
    config.lm_warmup.repo_code_repeats = 0
    assert repo_code_documents(tokenizer, config) == []


def test_the_warmup_keeps_the_demonstrations_system_message_once():
    tokenizer = Tokenizer.train(["You are an agent. Fix bugs.\nread it\nok"] * 4, vocab_size=300)
    system = {"role": "system", "content": "You are an agent. Fix bugs."}

    def record(task: str) -> dict:
        answer = {"role": "assistant", "content": "ok"}
        return {"messages": [system, {"role": "user", "content": task}, answer]}

    demonstrations = [record("fix a"), record("fix b"), record("fix c")]
    drill = {"messages": [{"role": "assistant", "content": "read it"}]}
    documents = lm_warmup_documents(tokenizer, demonstrations, [drill])
    system_ids = render_demonstration(tokenizer, {"messages": [system]}).token_ids
    starts_with_system = [ids[: len(system_ids)] == system_ids for ids in documents]
    assert starts_with_system == [True, False, False, False]
    assert documents[0] == render_demonstration(tokenizer, demonstrations[0]).token_ids
    unprompted = {"messages": demonstrations[1]["messages"][1:]}
    assert documents[1] == render_demonstration(tokenizer, unprompted).token_ids
    assert documents[3] == render_demonstration(tokenizer, drill).token_ids
    assert len(demonstrations[1]["messages"]) == 3  # the caller's records are left whole


def test_the_warmup_leaves_out_turns_a_demonstration_does_not_train_on():
    tokenizer = Tokenizer.train(["You are an agent.\nfix it\nok\nbroken"] * 4, vocab_size=300)
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "fix it"}]
    answer = {"role": "assistant", "content": "ok"}
    refused = [{"role": "assistant", "content": "broken", "train": False}, {"role": "tool", "content": "no"}]
    shown = {"messages": [*messages, *refused, answer]}
    (document,) = lm_warmup_documents(tokenizer, [shown], [])
    assert document == render_demonstration(tokenizer, {"messages": [*messages, answer]}).token_ids


def test_the_make_train_config_is_a_whole_main_job():
    config = load_config(REPO / "configs" / "tiny.toml")
    check_job_config(config, make_tasks(config.tasks.train_size, 0))
    assert config.lm_warmup.steps > 0 and config.lm_warmup.edit_drills > 0
    assert rl_mode(config) == "async+partial"
    assert config.tasks.eval_size >= 200  # the held-out bar for pass@1
    assert config.rl.eval_samples >= 4  # changes paired by task, four episodes a task
    assert "configs/tiny.toml" in (REPO / "Makefile").read_text().split("\ntrain:")[1].split("\n\n")[0]


def test_modes_are_named_by_the_rl_knobs():
    assert rl_mode(RunConfig.model_validate({"rl": {"staleness": 0}})) == "sync"
    assert rl_mode(RunConfig.model_validate({"rl": {"staleness": 2}})) == "async"
    assert (
        rl_mode(RunConfig.model_validate({"rl": {"staleness": 1, "overprovision": 1.5}})) == "async+partial"
    )


def test_bad_job_configs_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"model.max_position_embeddings = 1024 .*training.seq_len = 4608"):
        check_job_config(smoke_config(tmp_path, "model.max_position_embeddings=1024"))
    with pytest.raises(ConfigError, match=r"tasks\.eval_size"):
        check_job_config(smoke_config(tmp_path, "tasks.eval_size=0"))
    with pytest.raises(ConfigError, match=r"agent\.tools: no tool named 'edit'"):
        check_job_config(smoke_config(tmp_path, 'agent.tools=["read_file", "edit"]'))
    # 2 train tasks cannot hold ceil(1.5 x 2) = 3 groups in flight, one task each.
    with pytest.raises(ConfigError, match=r"rl\.batch_groups"):
        check_job_config(smoke_config(tmp_path), make_tasks(2, 0))
    check_job_config(smoke_config(tmp_path), make_tasks(8, 0))


def test_splits_are_capped_and_an_empty_one_is_an_error(tmp_path):
    config = smoke_config(tmp_path, "tasks.train_size=3", "tasks.eval_size=1")
    train, heldout = split_tasks(make_tasks(5, 2), config)
    assert [t.instance_id for t in train] == ["t0", "t1", "t2"] and [t.instance_id for t in heldout] == ["t5"]
    with pytest.raises(TaskError, match="no held-out tasks"):
        split_tasks(make_tasks(5, 0), config)
    with pytest.raises(TaskError, match="no train tasks"):
        split_tasks(make_tasks(0, 3), config)


def test_a_capped_split_takes_every_repository_in_turn(tmp_path):
    # Held-out tasks as a synthesized file orders them: repository after repository.
    tasks = [
        Task(f"{repo}-{i}", repo, "fix it", ["tests/test_x.py::test_x"], split="heldout")
        for repo, count in (("a", 5), ("b", 1), ("c", 4))
        for i in range(count)
    ]
    _, heldout = split_tasks([*make_tasks(1, 0), *tasks], smoke_config(tmp_path, "tasks.eval_size=6"))
    assert [t.instance_id for t in heldout] == ["a-0", "b-0", "c-0", "a-1", "c-1", "a-2"]
    _, every = split_tasks([*make_tasks(1, 0), *tasks], smoke_config(tmp_path, "tasks.eval_size=10"))
    assert every == tasks  # no cap: the file's order


def test_the_bundled_task_set_is_cached_by_seed_size_and_settings(tmp_path):
    config = smoke_config(tmp_path)
    folder = builtin_cache_dir(config)
    assert folder.parent == tmp_path / "task-sets" and "seed0-n10" in folder.name
    assert builtin_cache_dir(smoke_config(tmp_path)) == folder
    changes = (
        "seed=1", "tasks.train_size=9", "tasks.pass_to_pass=3", "tasks.heldout_repos=[]",
        "tasks.heldout_task_fraction=0.5", "tasks.max_function_lines=13",
    )  # fmt: skip
    for change in changes:
        assert builtin_cache_dir(smoke_config(tmp_path, change)) != folder, change
    # A cached set is read back as is, without synthesizing.
    write_tasks(folder / TASK_FILE, make_tasks(8, 2))
    tasks, source = asyncio.run(load_task_set(config, echo=lambda line: None))
    assert source.cached and source.path == folder / TASK_FILE
    assert [t.instance_id for t in tasks] == [t.instance_id for t in make_tasks(8, 2)]


def test_an_edited_bundled_repository_is_synthesized_again(tmp_path, monkeypatch):
    copies = []
    for repo in bundled_repos()[:2]:
        copies.append(tmp_path / "repos" / repo.name)
        shutil.copytree(repo, copies[-1], ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(job_tasks, "bundled_repos", lambda: copies)
    folder = builtin_cache_dir(smoke_config(tmp_path))
    assert builtin_cache_dir(smoke_config(tmp_path)) == folder
    (copies[0] / "README.md").write_text("edited\n")
    assert builtin_cache_dir(smoke_config(tmp_path)) != folder


def test_a_task_file_source_is_read_as_is_and_a_missing_one_is_named(tmp_path):
    write_tasks(tmp_path / "mine.jsonl", make_tasks(3, 1))
    tasks, source = asyncio.run(
        load_task_set(smoke_config(tmp_path, f"tasks.source={tmp_path / 'mine.jsonl'}"))
    )
    assert len(tasks) == 4 and not source.cached
    with pytest.raises(TaskError, match=r"tasks.source = .*nowhere.jsonl"):
        asyncio.run(load_task_set(smoke_config(tmp_path, f"tasks.source={tmp_path / 'nowhere.jsonl'}")))


def test_job_state_survives_a_reopen_and_a_fresh_run_forgets_it(tmp_path):
    state = JobState(tmp_path, fresh=True)
    state.record("sft", {"best": "x"})
    assert JobState(tmp_path, fresh=False).get("sft") == {"best": "x"}
    assert JobState(tmp_path, fresh=True).get("sft") is None


def test_a_resumed_phase_adds_its_seconds_to_the_first_runs(tmp_path):
    JobState(tmp_path, fresh=True).add_seconds("rl", 10.04)
    reopened = JobState(tmp_path, fresh=False)
    reopened.add_seconds("rl", 2.5)
    reopened.add_seconds("sft", 1.0)
    assert JobState(tmp_path, fresh=False).get("seconds") == {"rl": 12.5, "sft": 1.0}


def test_records_of_lost_rl_steps_are_dropped_on_resume(tmp_path):
    records = [
        {"step": 0, "phase": "eval", "when": "before"},
        {"step": 1, "phase": "rl"},
        {"step": 2, "phase": "rl"},
        {"step": 3, "phase": "sft"},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    _drop_records_after(tmp_path, 1)
    assert read_metrics(tmp_path) == [records[0], records[1], records[3]]


def test_cli_errors_are_clear_and_cost_nothing(tmp_path):
    bad_key = runner.invoke(
        app, ["train", str(SMOKE), "--set", f"output_dir={tmp_path}", "--set", "rl.stepz=3"]
    )
    assert bad_key.exit_code == 2 and "stepz" in bad_key.output
    both = runner.invoke(app, ["train", str(SMOKE), "--overwrite", "--resume"])
    assert both.exit_code == 2 and "not both" in both.output
    missing = runner.invoke(app, ["train", str(SMOKE), "--set", f"output_dir={tmp_path}", "--resume"])
    assert missing.exit_code == 2 and "no run to resume" in missing.output
    (tmp_path / "smoke").mkdir()
    exists = runner.invoke(app, ["train", str(SMOKE), "--set", f"output_dir={tmp_path}"])
    assert exists.exit_code == 2 and "--overwrite" in exists.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smoke"]  # nothing was built


def test_a_run_resumes_only_under_its_own_tasks_tokenizer_model_and_tools(tmp_path):
    RunDir(smoke_config(tmp_path, "seed=1")).close()  # a run of seed 1, stopped at once
    saved = (tmp_path / "smoke" / "config.toml").read_text()
    other_seed = runner.invoke(app, ["train", str(SMOKE), "--set", f"output_dir={tmp_path}", "--resume"])
    assert other_seed.exit_code == 2
    assert "seed: 1 in the run, 0 now" in other_seed.output and "config.toml --resume" in other_seed.output
    assert (tmp_path / "smoke" / "config.toml").read_text() == saved  # nothing of the run was touched
    assert resume_conflicts(smoke_config(tmp_path), smoke_config(tmp_path, "tasks.train_size=9")) == [
        "tasks.train_size: 8 in the run, 9 now"
    ]
    assert resume_conflicts(smoke_config(tmp_path), smoke_config(tmp_path, "model.hidden_size=32")) == [
        "model.hidden_size: 64 in the run, 32 now"
    ]
    assert resume_conflicts(smoke_config(tmp_path), smoke_config(tmp_path, 'agent.tools=["grep"]')) == [
        "agent.tools: None in the run, ['grep'] now"  # the system turn its demonstrations hold
    ]
    # Later phases' settings may change on resume (more RL steps, another task share).
    later = smoke_config(tmp_path, "rl.steps=5", "rl.temperature=0.5")
    assert resume_conflicts(smoke_config(tmp_path), later) == []


# ----------------------------------------------------------------------------- the smoke runs


@pytest.fixture(scope="module")
def output_dir(smoke_runs_dir) -> Path:
    """Shared with every smoke run of the session, so the bundled task set is synthesized once."""
    return smoke_runs_dir


def last_json_line(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def check_smoke_run(run: Path, summary: dict, config: RunConfig) -> None:
    """What every smoke run shows, whatever runtime ran it: the summary and the run directory."""
    assert summary["run_dir"] == str(run)
    assert summary["tasks"]["source"] == str(builtin_cache_dir(config) / TASK_FILE)
    assert (summary["tasks"]["train"], summary["tasks"]["heldout"]) == (8, 2)
    # SFT on the oracle's demonstrations, to its best held-out loss.
    sft = summary["sft"]
    assert sft["demonstrations"] >= 2 and 1 <= sft["steps"] <= 4
    assert sft["best_val_loss"] < sft["initial_val_loss"]
    assert Path(sft["best"]).is_dir() and (run / "sft" / "metrics.jsonl").is_file()
    # ... and how exactly its best weights write the held-out demonstrations' calls.
    calls = sft["call_accuracy"]["call"]
    assert calls["count"] > 0 and 0.0 <= calls["exact"] <= 1.0
    assert sft["call_accuracy"]["tool"]["count"] == calls["count"]
    # ... and whether it and the warm-up's weights copy repeated spans (scores, not a level).
    for copying in (sft["copying"], summary["lm_warmup"]["copying"]):
        assert copying["spans"] > 0 and 0.0 <= copying["second_showing"] <= 1.0
    # Both evaluations on the same held-out tasks.
    for when in ("eval_before", "eval_after"):
        assert summary[when]["tasks"] == 2 and 0.0 <= summary[when]["pass_at"]["pass@1"] <= 1.0
        assert "failed" not in summary[when]["statuses"], summary[when]["statuses"]  # e.g. by the engine
    assert summary["pass@1_before"] == summary["eval_before"]["pass_at"]["pass@1"]
    change = summary["pass@1_change"]["change"]
    assert change == pytest.approx(summary["pass@1_after"] - summary["pass@1_before"])
    # Every paired measure, before and after, with its change and standard error, per task.
    paired = summary["behaviour_change"]
    assert set(paired) >= {"pass@1", "pass@2", *PAIRED_MEASURES} - {"turns_resolved"}  # resolved: maybe none
    for name, figures in paired.items():
        assert set(figures) == {"before", "after", "change", "standard_error", "tasks"}, name
        assert figures["change"] == pytest.approx(figures["after"] - figures["before"]), name
    assert paired["pass@1"]["change"] == pytest.approx(change)
    # How much of pass@2 - pass@1 after SFT (two episodes a task) RL's pass@1 change took.
    sharp, before = summary["sharpening"], summary["eval_before"]["pass_at"]
    assert sharp["k"] == 2 and sharp["pass@1_change"] == pytest.approx(change)
    assert sharp["headroom"] == pytest.approx(before["pass@2"] - before["pass@1"])
    if sharp["headroom"] > 0:
        assert sharp["captured"] == pytest.approx(change / sharp["headroom"])
    assert "by_task" not in summary["eval_before"]  # kept in the job's state, not printed
    # Two async+partial RL steps, within the staleness bound.
    rl = summary["rl"]
    assert rl["mode"] == "async+partial" and rl["steps"] == 2 and rl["optimizer_steps"] == 2
    assert rl["max_staleness"] <= 1 and rl["tokens_generated"] > 0
    phases = {"tasks", "demonstrations", "lm_warmup", "sft", "eval_before", "rl", "eval_after"}
    assert set(summary["phase_seconds"]) == phases
    # The language-model warm-up ran first, and SFT started from its checkpoint.
    warmup = summary["lm_warmup"]
    assert warmup["steps"] == 3 and warmup["final_val_loss"] < warmup["initial_val_loss"]
    assert warmup["edit_drills"] > 0
    sft_start = load_config(run / "sft" / "config.toml").model.path
    assert sft_start == str(run / "lm-warmup" / "checkpoints" / "final")

    # The run directory.
    assert load_config(run / "config.toml") == config
    records = read_metrics(run)
    assert [r["step"] for r in records if r["phase"] == "rl"] == [1, 2]
    for step in (r for r in records if r["phase"] == "rl"):  # each step's reward by term, and behaviour
        assert {"batch_reward_score", "batch_reward_turn_cost", "batch_parallel_turn_share"} <= set(step)
    evals = [r for r in records if r["phase"] == "eval"]
    assert [(r["when"], r["version"]) for r in evals] == [("before", 0), ("after", 2)]
    assert evals[0]["pass@1"] == summary["pass@1_before"] and evals[1]["pass@1"] == summary["pass@1_after"]
    (logged,) = [r for r in records if r["phase"] == "behaviour_change"]
    assert logged["change/parallel_turn_share"] == paired["parallel_turn_share"]["change"]
    assert {key for name in paired for key in (f"change/{name}", f"change_se/{name}")} <= set(logged)
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert [p.name for p in complete_checkpoints(run / "checkpoints")] == ["step-00000001", "step-00000002"]
    assert load_pretrained(run / "checkpoints" / "final").config.hidden_size == 64
    for step in (1, 2):
        lines = (run / "trajectories" / f"rl-step-{step:06d}.jsonl").read_text().splitlines()
        trajectories = [json.loads(line) for line in lines]
        assert len(trajectories) == 4  # rl.batch_groups x rl.group_size
        assert all(t["versions"] and max(t["versions"]) <= step - 1 for t in trajectories)
    for when in ("before", "after"):
        lines = (run / "trajectories" / f"eval-{when}.jsonl").read_text().splitlines()
        assert len(lines) == 2 * config.rl.eval_samples  # each held-out task's episodes


def test_smoke_run_end_to_end_through_the_cli(smoke_run, output_dir):
    run, summary = smoke_run
    check_smoke_run(run, summary, smoke_config(output_dir))
    assert summary["tasks"]["cached"] is False  # the session's first smoke run built the task set


def test_smoke_run_on_ray_with_sft_and_the_rl_trainer_on_two_ranks(smoke_run, output_dir):
    # SFT as two rank actors; RL with trainer (sharded over two rank actors), engine and rollout
    # worker as actors; the same run directory as in process.
    overrides = ["name=smoke-ray", "runtime.ray=true", "parallel.nproc=2"]
    args = [arg for override in overrides for arg in ("--set", override)]
    result = runner.invoke(app, ["train", str(SMOKE), "--set", f"output_dir={output_dir}", *args])
    assert result.exit_code == 0, result.output
    summary = last_json_line(result.stdout)
    check_smoke_run(output_dir / "smoke-ray", summary, smoke_config(output_dir, *overrides))
    # The trainer actor's last checkpoint came back: the final weights are the RL-trained ones.
    checkpoints = output_dir / "smoke-ray" / "checkpoints"
    final = load_pretrained(checkpoints / "final").state_dict()
    trained = load_pretrained(checkpoints / "step-00000002" / "model").state_dict()
    sft = load_pretrained(summary["sft"]["best"]).state_dict()
    assert all(torch.equal(final[name], trained[name]) for name in final)
    assert any(not torch.equal(final[name], sft[name]) for name in final)


@pytest.mark.skipif(not default_python().exists(), reason="vLLM's environment is not built: `make vllm-env`")
@pytest.mark.parametrize("runtime", ["in-process", "ray"])
def test_smoke_run_with_rollouts_and_evaluations_on_vllm(smoke_run, output_dir, runtime):
    # In process, one server serves evaluations and RL; on Ray, the engine actor hosts the RL
    # phase's own server, and the job's serves the evaluations.
    overrides = [f"name=smoke-vllm-{runtime}", "engine.backend=vllm", "engine.vllm_dtype=float32"]
    overrides += ["runtime.ray=true"] if runtime == "ray" else []
    args = [arg for override in overrides for arg in ("--set", override)]
    result = runner.invoke(app, ["train", str(SMOKE), "--set", f"output_dir={output_dir}", *args])
    assert result.exit_code == 0, result.output
    run = output_dir / f"smoke-vllm-{runtime}"
    # Within it: staleness never above the bound (rl.staleness = 1) on vLLM either.
    check_smoke_run(run, last_json_line(result.stdout), smoke_config(output_dir, *overrides))
    # The servers overture started and stopped, and the weights each was last given.
    rl_server = run / "engine-actor" if runtime == "ray" else run
    for folder in {run, rl_server}:
        log = (folder / "vllm-server.log").read_text()
        assert "vllm.entrypoints.openai.api_server" in log and "Application startup complete" in log
    assert [p.name for p in (rl_server / "vllm-weights").iterdir()] == ["version-000002"]
    if runtime == "ray":  # the trainer actor's weights came back to the job's server for evaluation
        assert [p.name for p in (run / "vllm-weights").iterdir()] == ["version-000002"]


def test_a_stopped_run_resumes_without_losing_or_repeating_a_step(output_dir, monkeypatch):
    config = smoke_config(output_dir, "name=smoke-resume")
    stopped = train(config, stop_after_rl_step=1)
    assert stopped["stopped_after_rl_step"] == 1 and stopped["optimizer_steps"] == 1
    run = output_dir / "smoke-resume"
    saved = Tokenizer.from_dir(run)  # the job's tokenizer, kept in the run directory
    assert [p.name for p in complete_checkpoints(run / "checkpoints")] == ["step-00000001"]
    checkpoint_state = json.loads((run / "checkpoints" / "step-00000001" / "state.json").read_text())
    saved_queue = checkpoint_state["extra"]["task_queue"]
    restored_queues, dealt = [], []

    class RecordingOrchestrator(rl_phase.Orchestrator):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            restored_queues.append(args[6] if len(args) > 6 else kwargs.get("task_queue"))
            dealt.append([task.instance_id for task in args[2]])  # (rl, seed, tasks, ...)

    monkeypatch.setattr(rl_phase, "Orchestrator", RecordingOrchestrator)
    sft_records = len(read_metrics(run / "sft"))
    # As if step 2 had been logged when the process was killed, before its checkpoint.
    lost = {**read_metrics(run)[-1], "step": 2, "lost": True}
    with (run / "metrics.jsonl").open("a") as metrics:
        metrics.write(json.dumps(lost) + "\n")

    result = runner.invoke(
        app,
        ["train", str(SMOKE), "--set", f"output_dir={output_dir}", "--set", "name=smoke-resume", "--resume"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = last_json_line(result.stdout)
    assert summary["rl"]["steps"] == 2 and summary["rl"]["optimizer_steps"] == 2
    assert summary["tasks"]["cached"] is True
    records = read_metrics(run)
    rl_records = [r for r in records if r["phase"] == "rl"]
    assert [(r["step"], r["version"]) for r in rl_records] == [(1, 1), (2, 2)] and "lost" not in rl_records[1]
    assert [r["when"] for r in records if r["phase"] == "eval"] == ["before", "after"]  # not evaluated twice
    assert len(read_metrics(run / "sft")) == sft_records  # SFT was not run again
    assert saved_queue["order"] and restored_queues == [saved_queue]  # tasks dealt on from where it stood
    train_ids = {task.instance_id for task in read_tasks(summary["tasks"]["source"]) if task.split == "train"}
    assert [set(ids) for ids in dealt] == [train_ids] and summary["tasks"]["rl"] == len(train_ids) == 8
    state = json.loads((run / "checkpoints" / "step-00000002" / "state.json").read_text())
    assert state["step"] == 2 and state["policy_version"] == 2
    tasks = read_tasks(summary["tasks"]["source"])
    assert len(tasks) == 10
    assert Tokenizer.from_dir(run / "checkpoints" / "final").backend.get_vocab() == saved.backend.get_vocab()


def test_kill_9_of_the_training_program_then_resume_loses_and_repeats_no_step(output_dir):
    args = ["--set", f"output_dir={output_dir}", "--set", "name=smoke-kill", "--set", "rl.steps=3"]
    command = [str(Path(sys.executable).with_name("overture")), "train", str(SMOKE), *args]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    run = output_dir / "smoke-kill"
    first = run / "checkpoints" / "step-00000001" / "COMPLETE.json"
    deadline = time.monotonic() + 600
    try:
        while not first.exists():
            assert process.poll() is None, "the run ended before its first RL checkpoint"
            assert time.monotonic() < deadline, "no RL checkpoint within 10 minutes"
            time.sleep(0.05)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the program and every process it started
        process.wait()
    # Killed mid-RL: step 1 checkpointed, step 3 never reached.
    assert not (run / "checkpoints" / "final").exists()
    assert [r["step"] for r in read_metrics(run) if r["phase"] == "rl"] in ([1], [1, 2])

    result = runner.invoke(app, ["train", str(SMOKE), *args, "--resume"])
    assert result.exit_code == 0, result.output
    summary = last_json_line(result.stdout)
    assert summary["rl"]["steps"] == 3 and summary["rl"]["optimizer_steps"] == 3
    records = read_metrics(run)
    assert [(r["step"], r["version"]) for r in records if r["phase"] == "rl"] == [(1, 1), (2, 2), (3, 3)]
    assert [r["when"] for r in records if r["phase"] == "eval"] == ["before", "after"]
    state = json.loads((run / "checkpoints" / "step-00000003" / "state.json").read_text())
    assert state["step"] == 3 and state["policy_version"] == 3
