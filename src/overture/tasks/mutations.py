"""Procedural bug synthesis: enumerate small, realistic mutations of a Python file and apply one.

`find_mutations(source, path)` lists every candidate `Mutation` inside the bodies of functions
and methods; `apply_mutation(source, mutation)` returns the whole file with that one change. The
tree is libcst's concrete syntax tree, so formatting and comments survive and the mutated file
differs from the original only in the lines a `Mutation` reports. A separate pipeline runs the
repository's tests on each mutated file and keeps the mutations that break one.

Where sites are looked for: only in function and method bodies (nested functions and lambdas
included), never at module level, in class bodies, decorators, default argument values,
annotations or docstrings. Functions whose body is only a docstring, `pass`, `...` or
`raise NotImplementedError` are skipped, and so are `__repr__` and `__str__`.

Replacement rules (each (location, replacement) pair is one `Mutation` with its own `site`):

- flip_comparison: one replacement per comparison operator (a chained comparison has one site
  per operator): `<`↔`<=`, `>`↔`>=`, `==`↔`!=`, `in`↔`not in`, `is`↔`is not`.
- flip_arithmetic: `+`↔`-`, `*`↔`/`, `//`→`/`, `%`→`//`, `**`→`*`; the same for augmented
  assignments (`+=`↔`-=`, `*=`↔`/=`, `//=`→`/=`, `%=`→`//=`, `**=`→`*=`); `and`↔`or`. Skipped
  when an operand is a string literal (concatenation, `%` formatting). Bitwise operators and `@`
  are left alone.
- swap_operands: `a - b` → `b - a` for the non-commutative operators `-`, `/`, `//`, `%`, `**`,
  `<<`, `>>`, and `x < y` → `y < x` for unchained `<`, `<=`, `>`, `>=` (`==`, `!=`, `is`, `in`
  are left alone: swapping them is a no-op or not a plausible slip). Skipped when both operands
  render identically or one is a string literal. Parentheses are added where precedence needs
  them (`a - b - c` → `c - (a - b)`).
- change_constant: integer and float literals n → n + 1, then n → n - 1 (a negative literal such
  as `-1` counts as one constant; hex/octal/binary keep their base); `True`↔`False`. Strings,
  `None` and complex literals are left alone. Literal slice bounds (`x[1:]`) are included.
- off_by_one: the stop argument of `range(...)` (the only argument, or the second), subscript
  indexes and non-literal slice bounds, each +1 then -1, written `x[i + 1]`; an existing
  `E + k` / `E - k` is folded (`range(n - 1)` → `range(n)` and `range(n - 2)`). Integer-literal
  stops, indexes and bounds are left to change_constant. Since types are not known, an index
  must be a name, an attribute or a `+`/`-` expression, and not a capitalised name (a class,
  `None`) or a builtin type name; subscripts of `list`, `dict`, `type`... are skipped.
- invert_condition: the test of `if`, `elif`, `while` and `a if c else b` (not `assert`) →
  `not c` when c is a name, attribute, call or subscript, `not (c)` otherwise; an existing
  `not c` becomes `c`; a parenthesized test keeps its parentheses outside (`if(x):` →
  `if(not x):`). Literal tests (`while True`) are skipped.
- remove_statement: a one-statement line that is an assignment (plain, annotated with a value,
  augmented), an expression statement (not a docstring, `...` or `yield`) or a `return` that is
  not the last statement of the function body; or a whole `if`/`for`/`while` block. Comments
  above the removed statement stay. If it is the only statement of its block, `pass` replaces
  it. `mutated` is "" for this kind.
- wrong_return: `return NAME` where NAME is a parameter or a local bound earlier in the function
  (by assignment, `for` target, `with ... as` or `:=`) → `return OTHER` for up to 3 others:
  locals bound earlier, most recently first-bound first, then parameters in signature order;
  never `self` or `cls`, never globals or names bound only later.

`site` is the index of the mutation among those of its kind in the file, in source order (outer
nodes before inner ones; the +1 variant before the -1 one); `apply_mutation` finds it again by
kind and index and checks its function and texts. `find_mutations` returns all kinds
interleaved in source order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from overture.tasks.mutation_sites import MUTATION_KINDS, Site, collect_sites

__all__ = ["MUTATION_KINDS", "Mutation", "MutationError", "apply_mutation", "find_mutations"]


@dataclass(frozen=True)
class Mutation:
    path: str  # the file, as the caller named it
    function: str  # qualified name of the enclosing function: "f", "Class.method", "outer.inner"
    kind: str  # one of MUTATION_KINDS
    site: int  # index among the mutations of this kind in this file, in source order
    line: int  # first line (1-based, in the original) of the changed code
    end_line: int  # last line of the changed code in the original
    original: str  # source of the changed node, e.g. "a < b"
    mutated: str  # its source after the change, e.g. "a <= b"; "" for remove_statement
    description: str  # e.g. "flip comparison < to <="


class MutationError(ValueError):
    """Source that does not parse, an unknown kind, or a mutation that does not apply."""


def find_mutations(
    source: str, path: str = "<string>", kinds: Sequence[str] = MUTATION_KINDS
) -> list[Mutation]:
    """Every mutation of the requested kinds, in source order, deterministically."""
    _check_kinds(kinds, path)
    module = _parse(source, path)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    counters = dict.fromkeys(MUTATION_KINDS, 0)
    mutations = []
    for site in collect_sites(module, kinds):
        position = positions[site.anchor]
        mutations.append(
            Mutation(
                path=path,
                function=site.function,
                kind=site.kind,
                site=counters[site.kind],
                line=position.start.line,
                end_line=_end_line(site, position.start.line, position.end.line),
                original=site.original,
                mutated=site.mutated,
                description=site.description,
            )
        )
        counters[site.kind] += 1
    return mutations


def apply_mutation(source: str, mutation: Mutation) -> str:
    """The whole source of the file with `mutation` applied."""
    _check_kinds([mutation.kind], mutation.path)
    sites = _sites(source, mutation.path, mutation.kind)
    if not 0 <= mutation.site < len(sites):
        raise MutationError(
            f"{mutation.path}: no {mutation.kind} site #{mutation.site} "
            f"(the file has {len(sites)}); is the source stale?"
        )
    site = sites[mutation.site]
    if (site.original, site.mutated, site.function) != (
        mutation.original,
        mutation.mutated,
        mutation.function,
    ):
        raise MutationError(
            f"{mutation.path}: {mutation.kind} site #{mutation.site} in {site.function} "
            f"is {site.original!r}, expected {mutation.original!r} in {mutation.function}; "
            "is the source stale?"
        )
    return site.applied().code


@functools.lru_cache(maxsize=64)
def _sites(source: str, path: str, kind: str) -> tuple[Site, ...]:
    """The sites of one kind in `source`, parsed once for every mutation applied to the same file
    (syntax trees are immutable: applying one site leaves the others as they were)."""
    return tuple(collect_sites(_parse(source, path), [kind]))


def _end_line(site: Site, start_line: int, end_line: int) -> int:
    # A removed block also takes the trailing comments its inner blocks own.
    if site.kind == "remove_statement":
        return start_line + site.original.count("\n")
    return end_line


def _check_kinds(kinds: Sequence[str], path: str) -> None:
    unknown = [kind for kind in kinds if kind not in MUTATION_KINDS]
    if unknown:
        raise MutationError(f"{path}: unknown mutation kind(s) {unknown}; known: {list(MUTATION_KINDS)}")


def _parse(source: str, path: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise MutationError(f"{path}: cannot parse: {error.message} (line {error.raw_line})") from error
