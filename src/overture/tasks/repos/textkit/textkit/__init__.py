"""textkit: small, dependency-free text utilities."""

from textkit.casing import (
    slugify,
    split_words,
    to_camel_case,
    to_kebab_case,
    to_pascal_case,
    to_snake_case,
    to_title_case,
)
from textkit.encoding import from_roman, rle_decode, rle_encode, rle_pairs, to_roman
from textkit.fuzzy import closest_match, common_prefix, hamming_distance, levenshtein, similarity, suggest
from textkit.layout import justify, justify_line, pad, truncate, truncate_words, wrap
from textkit.parsing import (
    MissingKeyError,
    TemplateError,
    escape_html,
    render,
    sentences,
    template_fields,
    word_frequencies,
    words,
)

__all__ = [
    "MissingKeyError",
    "TemplateError",
    "closest_match",
    "common_prefix",
    "escape_html",
    "from_roman",
    "hamming_distance",
    "justify",
    "justify_line",
    "levenshtein",
    "pad",
    "render",
    "rle_decode",
    "rle_encode",
    "rle_pairs",
    "sentences",
    "similarity",
    "slugify",
    "split_words",
    "suggest",
    "template_fields",
    "to_camel_case",
    "to_kebab_case",
    "to_pascal_case",
    "to_roman",
    "to_snake_case",
    "to_title_case",
    "truncate",
    "truncate_words",
    "word_frequencies",
    "words",
    "wrap",
]
