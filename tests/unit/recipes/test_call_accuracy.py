"""Tests of overture.recipes.main_job.call_accuracy: which call arguments a model reproduces
under teacher forcing."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from overture.model import CausalLMOutput
from overture.recipes.main_job.call_accuracy import call_argument_accuracy, value_spans
from overture.text import Tokenizer, ToolCall
from overture.text.chat import call_json

EDIT = {"file_path": "pkg/core.py", "old_string": "    ZZZ = 1\n", "new_string": "    total = 1\n"}
READ = {"path": "pkg/core.py", "offset": 127, "limit": 8}


def record(edit: dict) -> dict:
    read = [{"name": "read_file", "arguments": READ}]
    edit_and_test = [
        {"name": "search_replace", "arguments": edit},
        {"name": "run_terminal_cmd", "arguments": {"command": "pytest -q"}},
    ]
    return {
        "messages": [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "A test fails in pkg."},
            {"role": "assistant", "content": "Reading.", "tool_calls": read},
            {"role": "tool", "content": "127|def f():\n128|    total = 1"},
            {"role": "assistant", "content": "", "tool_calls": edit_and_test},
        ]
    }


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    texts = [json.dumps(record(EDIT)), json.dumps(record({**EDIT, "old_string": "    total = 2\n"}))] * 4
    return Tokenizer.train(texts, vocab_size=400)


class TeacherModel(nn.Module):
    """Predicts the next input token (a model that has the demonstration by heart), except where
    that token's text contains a character of `misses`."""

    def __init__(self, tokenizer: Tokenizer, misses: str = "") -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.wrong = [any(c in tokenizer.decode([i]) for c in misses) for i in range(tokenizer.vocab_size)]
        self.vocab = tokenizer.vocab_size

    def forward(self, ids: torch.Tensor) -> CausalLMOutput:
        following = torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)
        rows = [[(t + 1) % self.vocab if self.wrong[t] else t for t in row] for row in following.tolist()]
        guess = torch.tensor(rows)
        logits = nn.functional.one_hot(guess, self.vocab).float()
        return CausalLMOutput(logits=logits, aux_loss=torch.zeros(()), tokens_per_expert=torch.zeros(0, 0))


def test_value_spans_point_at_each_rendered_value() -> None:
    call = ToolCall("read_file", READ)
    text, spans = value_spans(call)
    assert text == "\n" + call_json(call) + "\n"
    assert [label for label, _, _ in spans] == ["tool", "path", "offset", "limit"]
    assert [text[start:end] for _, start, end in spans] == ['"read_file"', '"pkg/core.py"', "127", "8"]


def test_a_marker_inside_an_argument_leaves_the_call_unsplit() -> None:
    assert value_spans(ToolCall("write_file", {"path": "a", "content": "x</tool_call>"})) is None


def test_a_model_that_has_the_calls_by_heart_reproduces_every_argument(tokenizer: Tokenizer) -> None:
    model = TeacherModel(tokenizer)
    result = call_argument_accuracy(model, tokenizer, [record(EDIT), record(EDIT)])
    assert result["call"] == {"exact": 1.0, "count": 6}
    assert result["tool"] == {"exact": 1.0, "count": 6}
    assert result["old_string"] == {"exact": 1.0, "count": 2}
    assert result["path"] == {"exact": 1.0, "count": 2}
    arguments = {"path", "offset", "limit", "file_path", "old_string", "new_string", "command"}
    assert set(result) == {"call", "tool", *arguments, "old_string@change", "new_string@change"}
    assert result["old_string@change"] == {"exact": 1.0, "count": 2}
    assert model.training  # left in the mode it came in


def test_one_wrong_token_fails_its_argument_and_call_only(tokenizer: Tokenizer) -> None:
    model = TeacherModel(tokenizer, misses="Z")  # "Z" is only in one old_string
    other = {**EDIT, "old_string": "    total = 2\n"}
    result = call_argument_accuracy(model, tokenizer, [record(EDIT), record(other)])
    assert result["old_string"] == {"exact": 0.5, "count": 2}
    assert result["call"] == {"exact": 5 / 6, "count": 6}
    for name in ("tool", "path", "offset", "limit", "file_path", "new_string", "command"):
        assert result[name]["exact"] == 1.0, name


def test_a_digit_wrong_fails_the_offset(tokenizer: Tokenizer) -> None:
    result = call_argument_accuracy(TeacherModel(tokenizer, misses="7"), tokenizer, [record(EDIT)])
    assert result["offset"]["exact"] == 0.0
    assert result["path"]["exact"] == 1.0


def test_the_change_token_of_an_edit_is_scored_on_its_own(tokenizer: Tokenizer) -> None:
    # "    ZZZ = 1" against "    total = 1": the change starts at the first "Z" (missed) and "t".
    other = {**EDIT, "old_string": "    total = 2\n"}  # against "    total = 1": the digits
    records = [record(EDIT), record(other)]
    result = call_argument_accuracy(TeacherModel(tokenizer, misses="Z"), tokenizer, records)
    assert result["old_string@change"] == {"exact": 0.5, "count": 2}
    assert result["new_string@change"] == {"exact": 1.0, "count": 2}
    # A miss elsewhere in the string fails the string but not its change token.
    result = call_argument_accuracy(TeacherModel(tokenizer, misses="="), tokenizer, [record(other)])
    assert result["old_string"]["exact"] == 0.0 and result["new_string"]["exact"] == 0.0
    assert result["old_string@change"]["exact"] == 1.0 and result["new_string@change"]["exact"] == 1.0
    # A miss on the changed digit fails the change token.
    result = call_argument_accuracy(TeacherModel(tokenizer, misses="2"), tokenizer, [record(other)])
    assert result["old_string@change"]["exact"] == 0.0 and result["new_string@change"]["exact"] == 1.0
