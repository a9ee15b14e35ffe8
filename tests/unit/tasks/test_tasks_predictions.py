"""`overture tasks grade --predictions`: SWE-bench predictions graded in real sandboxes, one report
per prediction in file order and a summary; malformed entries named and the rest still graded."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.tasks.predictions import (
    Entry,
    Prediction,
    PredictionReport,
    check_predictions,
    grade_prediction,
    in_input_order,
    read_predictions,
)
from overture.tasks.spec import write_tasks

runner = CliRunner()
MODEL = "model-a"
NOT_APPLYING = (
    "--- a/numbers_kit/core.py\n+++ b/numbers_kit/core.py\n@@ -1,3 +1,3 @@\n"
    " no such line\n-nor this one\n+replaced\n and none here\n"
)


def _prediction(instance_id, patch, model=MODEL) -> str:
    return json.dumps({"instance_id": instance_id, "model_patch": patch, "model_name_or_path": model})


def _grade(*args: str):
    return runner.invoke(app, ["tasks", "grade", *args])


def _lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.strip().splitlines()]


def test_reports_in_file_order_malformed_lines_named_and_the_summary_counts(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    fixed, empty, broken, unpredicted = tasks[:4]
    task_file = write_tasks(tmp_path / "tasks.jsonl", [fixed, empty, broken, unpredicted])
    lines = [
        _prediction(fixed.instance_id, fixed.patch),  # 1
        '{"instance_id": "x", ',  # 2: cut short
        _prediction(empty.instance_id, ""),  # 3
        json.dumps({"instance_id": broken.instance_id, "model_patch": "x"}),  # 4: no model name
        "",  # 5: blank, skipped
        _prediction(broken.instance_id, NOT_APPLYING),  # 6
        _prediction("nobody__1", fixed.patch),  # 7: no such task
        _prediction(fixed.instance_id, ""),  # 8: predicted on line 1 already
        json.dumps([fixed.instance_id]),  # 9: not an object
        json.dumps({"instance_id": unpredicted.instance_id, "model_patch": 7, "model_name_or_path": MODEL}),
        "[" * 5000 + "]" * 5000,  # 11: nested past the parser's depth
    ]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "reports.jsonl"

    result = _grade(str(task_file), "--predictions", str(predictions), "--out", str(out), "--jobs", "2")
    assert result.exit_code == 1, result.output
    *reports, summary = _lines(result.stdout)
    assert [r["instance_id"] for r in reports] == [fixed.instance_id, empty.instance_id, broken.instance_id]
    assert _lines(out.read_text()) == reports

    resolved, nothing, not_applied = reports
    assert (resolved["resolution"], resolved["score"], resolved["reason"]) == ("resolved", 1.0, "")
    assert resolved["model_name_or_path"] == MODEL
    assert resolved["FAIL_TO_PASS"] == dict.fromkeys(fixed.FAIL_TO_PASS, "PASSED")
    assert set(resolved["PASS_TO_PASS"]) == set(fixed.PASS_TO_PASS)
    assert set(resolved["PASS_TO_PASS"].values()) <= {"PASSED", "XFAIL"}
    assert (nothing["resolution"], nothing["score"], nothing["reason"]) == ("none", 0.0, "empty diff")
    assert nothing["FAIL_TO_PASS"] == dict.fromkeys(empty.FAIL_TO_PASS)  # tests never ran: no outcome
    assert not_applied["resolution"] == "none" and not_applied["score"] == 0.0
    assert not_applied["reason"].startswith("model_patch does not apply: ")
    assert "1 out of 1 hunk FAILED" in not_applied["reason"]

    malformed = {entry["line"]: entry["problem"] for entry in summary["malformed"]}
    assert sorted(malformed) == [2, 4, 7, 8, 9, 10, 11]
    assert malformed[2].startswith("not valid JSON")
    assert malformed[4] == "missing field(s) model_name_or_path"
    assert malformed[7] == "no task has instance_id 'nobody__1'"
    assert malformed[8] == f"instance_id {fixed.instance_id!r} was already predicted (line 1)"
    assert malformed[9] == "a prediction must be a JSON object, got list"
    assert malformed[10] == "model_patch must be a string (or null), got int"
    assert malformed[11] == "not valid JSON: nested too deeply"
    assert {key: summary[key] for key in ("tasks", "graded", "resolved", "partial", "none", "tampering")} == {
        "tasks": 4, "graded": 3, "resolved": 1, "partial": 0, "none": 2, "tampering": 0,
    }  # fmt: skip
    assert summary["resolved_share"] == 1 / 3
    assert summary["no_prediction"] == [unpredicted.instance_id]
    assert summary["no_task"] == ["nobody__1"]


def test_a_json_list_of_well_formed_predictions_exits_0(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    task_file = write_tasks(tmp_path / "tasks.jsonl", tasks[4:6])
    predictions = tmp_path / "preds.json"
    predictions.write_text(
        json.dumps([
            {"instance_id": tasks[4].instance_id, "model_patch": tasks[4].patch, "model_name_or_path": "m"},
            {"instance_id": tasks[5].instance_id, "model_patch": None, "model_name_or_path": "m"},
        ])
    )  # fmt: skip
    result = _grade(str(task_file), "--predictions", str(predictions))
    assert result.exit_code == 0, result.output
    *reports, summary = _lines(result.stdout)
    assert [(r["resolution"], r["reason"]) for r in reports] == [("resolved", ""), ("none", "empty diff")]
    assert (summary["resolved"], summary["none"], summary["malformed"], summary["no_prediction"]) == (
        1, 1, [], [],
    )  # fmt: skip


def test_unreadable_predictions_files_are_named_with_exit_status_2(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    task_file = write_tasks(tmp_path / "tasks.jsonl", tasks[:1])
    result = _grade(str(task_file), "--predictions", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2 and "missing.jsonl: predictions file not found" in result.output
    not_a_list = tmp_path / "preds.json"
    not_a_list.write_text('"just a string"')
    result = _grade(str(task_file), "--predictions", str(not_a_list))
    assert result.exit_code == 2 and "must hold a JSON list of predictions" in result.output


def test_entries_are_checked_field_by_field(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    known = tasks[0].instance_id
    path = tmp_path / "preds.jsonl"
    path.write_bytes(
        b"\n".join([
            b'{"instance_id": "\xff\xfe", "model_patch": "", "model_name_or_path": "m"}',
            b'{"instance_id": "a", "model_patch": "", "model_name_or_path": "m", "n": 1' + b"1" * 5000 + b"}",
            _prediction(known, "\ud800").encode(),
            _prediction(known, None, model=3).encode(),
            _prediction("", "").encode(),
            _prediction("y" * 500, "").encode(),
            _prediction(known, None).encode(),
        ])
    )  # fmt: skip
    unit, entries = read_predictions(path)
    accepted, malformed = check_predictions(unit, entries, tasks)
    problems = {m.number: m.problem for m in malformed}
    assert problems[1].startswith("not UTF-8 text")
    assert problems[2].startswith("not valid JSON") and "digits" in problems[2]
    assert problems[3] == "model_patch holds an unpaired surrogate (\\ud800-\\udfff), which is not text"
    assert problems[4] == "model_name_or_path must be a string, got int"
    assert problems[5] == "instance_id must be a non-empty string, got ''"
    assert problems[6].startswith("no task has instance_id 'yyy") and problems[6].endswith("(502 characters)")
    assert [(p.number, p.instance_id, p.model_patch) for p in accepted] == [(7, known, "")]


def test_a_host_side_failure_grades_that_prediction_none_with_the_reason(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    lost = dataclasses.replace(tasks[0], base=str(tmp_path / "gone"))
    prediction = Prediction(0, 1, lost.instance_id, lost.patch, MODEL)

    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            return await grade_prediction(pool, lost, prediction, RunConfig().tasks)

    report = asyncio.run(main())
    assert (report.resolution, report.score) == ("none", 0.0)
    assert report.reason.startswith("grading failed: SnapshotError: ") and "gone" in report.reason
    outcomes = report.FAIL_TO_PASS
    assert outcomes == dict.fromkeys(lost.FAIL_TO_PASS)


def test_reports_arriving_out_of_order_are_emitted_in_file_order():
    emitted: list[int] = []
    arrive = in_input_order(lambda report: emitted.append(report.index))
    reports = {i: PredictionReport(i, f"t{i}", MODEL, "none", 0.0, "") for i in range(4)}
    arrive(reports[2])
    arrive(reports[1])
    assert emitted == []
    arrive(reports[0])
    assert emitted == [0, 1, 2]
    arrive(reports[3])
    assert emitted == [0, 1, 2, 3]


def test_a_non_object_entry_in_a_json_list_is_named_by_its_item(numbers_task_set, tmp_path):
    _, tasks = numbers_task_set
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"a": {"instance_id": tasks[0].instance_id, "model_patch": ""}, "b": 5}))
    unit, entries = read_predictions(path)
    assert unit == "item" and [e.number for e in entries] == [1, 2]
    _, malformed = check_predictions(unit, [*entries, Entry(3, None)], tasks)
    assert [m.to_dict() for m in malformed] == [
        {"item": 1, "problem": "missing field(s) model_name_or_path"},
        {"item": 2, "problem": "a prediction must be a JSON object, got int"},
        {"item": 3, "problem": "a prediction must be a JSON object, got NoneType"},
    ]
