"""What the main job's language-model warm-up trains on, besides the corpus overture ships.

- `lm_warmup_documents`: the oracle demonstrations and drills as token ids, the system message
  they share kept once;
- `repo_code_documents`: the train repositories' library code, repeated
  (`lm_warmup.repo_code_repeats`), code to know by heart to write a fixed function out;
- `heldout_repo_folders`: the package folders of `tasks.heldout_repos`, which the warm-up never sees.
"""

from __future__ import annotations

from typing import Any

from overture.config import RunConfig
from overture.supervised.demonstrations import render_demonstration, without_system, without_untrained_turns
from overture.tasks import REPOS_FOLDER
from overture.text import Tokenizer
from overture.text.corpus import package_sources


def lm_warmup_documents(
    tokenizer: Tokenizer, demonstrations: list[dict[str, Any]], drills: list[dict[str, Any]]
) -> list[list[int]]:
    """Token ids of the warm-up's conversations: the demonstrations, the system message kept in
    the first only (it is the same in every one, about 1,500 tokens with the tools' schemas: kept
    in all it would be almost a third of the warm-up's data, learned after a few), then the drills.
    Every token of a document is trained on, so turns a demonstration shows but does not train on
    (an edit shown only to be refused) are left out, with the results that answered them."""
    plain = [without_untrained_turns(record) for record in demonstrations]
    kept = plain[:1] + [without_system(record) for record in plain[1:]]
    return [render_demonstration(tokenizer, record).token_ids for record in [*kept, *drills]]


def repo_code_documents(tokenizer: Tokenizer, config: RunConfig) -> list[list[int]]:
    """Token ids of the bundled repositories' library source (their tests and the held-out
    repositories left out), file by file, `lm_warmup.repo_code_repeats` times over."""
    unseen = tuple(folder + "/" for folder in heldout_repo_folders(config))
    library = [
        text
        for path, text in package_sources()
        if path.startswith(f"{REPOS_FOLDER}/")
        and not path.startswith(unseen)
        and path.split("/")[3] != "tests"
    ]
    encoded = [tokenizer.encode(text) for text in library]
    return [ids for _ in range(config.lm_warmup.repo_code_repeats) for ids in encoded]


def heldout_repo_folders(config: RunConfig) -> list[str]:
    """The package folders of the held-out repositories, which the warm-up's corpus leaves out."""
    return [f"{REPOS_FOLDER}/{name}" for name in config.tasks.heldout_repos]
