"""Procedural bug synthesis: every mutation kind, exact output, site scoping, errors, diffs."""

from __future__ import annotations

import ast
import difflib
import textwrap
from collections import Counter
from dataclasses import replace

import pytest

from overture.tasks.mutations import MUTATION_KINDS, Mutation, MutationError, apply_mutation, find_mutations


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def pick(source: str, kind: str, original: str, mutated: str) -> Mutation:
    """The one mutation of `kind` that turns `original` into `mutated`."""
    found = [
        m for m in find_mutations(source, "mod.py", [kind]) if (m.original, m.mutated) == (original, mutated)
    ]
    assert len(found) == 1, [(m.original, m.mutated) for m in find_mutations(source, "mod.py", [kind])]
    return found[0]


def call(source: str, function: str, *args):
    namespace: dict = {}
    exec(compile(source, "mod.py", "exec"), namespace)
    return namespace[function](*args)


COUNT_BELOW = src('''
    def count_below(values, limit):
        """How many values are below `limit`."""
        count = 0
        for value in values:
            if value < limit:
                count += 1  # one more
        return count
''')


def test_flip_comparison_changes_only_the_operator() -> None:
    mutation = pick(COUNT_BELOW, "flip_comparison", "value < limit", "value <= limit")
    mutated = apply_mutation(COUNT_BELOW, mutation)
    assert mutated == COUNT_BELOW.replace("if value < limit:", "if value <= limit:")
    assert (mutation.line, mutation.end_line, mutation.function) == (5, 5, "count_below")
    assert mutation.description == "flip comparison < to <="
    assert call(COUNT_BELOW, "count_below", [1, 2, 3], 3) == 2
    assert call(mutated, "count_below", [1, 2, 3], 3) == 3


def test_flip_comparison_has_one_site_per_operator_of_a_chain() -> None:
    source = src("""
        def in_range(x, items):
            return 0 <= x < 10 and x in items and items is not None
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["flip_comparison"])]
    assert pairs == [
        ("0 <= x < 10", "0 < x < 10"),
        ("0 <= x < 10", "0 <= x <= 10"),
        ("x in items", "x not in items"),
        ("items is not None", "items is None"),
    ]
    assert [m.site for m in find_mutations(source, kinds=["flip_comparison"])] == [0, 1, 2, 3]
    mutated = apply_mutation(source, pick(source, "flip_comparison", "x in items", "x not in items"))
    assert call(source, "in_range", 3, [3]) is True
    assert call(mutated, "in_range", 3, [3]) is False


def test_flip_arithmetic_binary_augmented_and_boolean() -> None:
    source = src("""
        def mean_if(values, enabled, forced):
            total = 0
            for value in values:
                total += value
            if enabled or forced:
                return total / len(values)
            return 0
    """)
    divide_site = pick(source, "flip_arithmetic", "total / len(values)", "total * len(values)")
    divide = apply_mutation(source, divide_site)
    assert divide == source.replace("total / len(values)", "total * len(values)")
    assert call(source, "mean_if", [2, 4], True, False) == 3
    assert call(divide, "mean_if", [2, 4], True, False) == 12

    augmented = apply_mutation(source, pick(source, "flip_arithmetic", "total += value", "total -= value"))
    assert augmented == source.replace("total += value", "total -= value")
    assert call(augmented, "mean_if", [2, 4], True, False) == -3

    boolean_site = pick(source, "flip_arithmetic", "enabled or forced", "enabled and forced")
    boolean = apply_mutation(source, boolean_site)
    assert boolean == source.replace("enabled or forced", "enabled and forced")
    assert call(boolean, "mean_if", [2, 4], True, False) == 0


def test_flip_arithmetic_skips_string_concatenation() -> None:
    source = src("""
        def greet(name, n):
            return "hi " + name + str(n - 1)
    """)
    originals = [m.original for m in find_mutations(source, kinds=["flip_arithmetic"])]
    assert originals == ["n - 1"]


def test_swap_operands_of_subtraction_and_comparison() -> None:
    source = src("""
        def gap(a, b, c):
            if a - b - c > c:
                return a - b - c
            return a + b + (c - c)
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["swap_operands"])]
    # `a + b` is commutative and `c - c` renders the same both ways: no sites.
    assert pairs == [
        ("a - b - c > c", "c > a - b - c"),
        ("a - b - c", "c - (a - b)"),
        ("a - b", "b - a"),
        ("a - b - c", "c - (a - b)"),
        ("a - b", "b - a"),
    ]
    mutation = find_mutations(source, kinds=["swap_operands"])[3]
    mutated = apply_mutation(source, mutation)
    assert mutated == source.replace("return a - b - c", "return c - (a - b)")
    assert call(source, "gap", 10, 1, 2) == 7
    assert call(mutated, "gap", 10, 1, 2) == -7


def test_change_constant_integers_negatives_and_booleans() -> None:
    source = src("""
        def last_scaled(values, strict=False):
            keep = True
            if keep:
                return values[-1] * 3
            return None
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["change_constant"])]
    # The default `strict=False` is not a site.
    assert pairs == [("True", "False"), ("-1", "0"), ("-1", "-2"), ("3", "4"), ("3", "2")]
    mutated = apply_mutation(source, pick(source, "change_constant", "-1", "-2"))
    assert mutated == source.replace("values[-1]", "values[-2]")
    assert call(source, "last_scaled", [1, 2]) == 6
    assert call(mutated, "last_scaled", [1, 2]) == 3
    assert (
        call(apply_mutation(source, pick(source, "change_constant", "True", "False")), "last_scaled", [1, 2])
        is None
    )


def test_off_by_one_range_stop_and_index() -> None:
    source = src("""
        def pair_sums(xs):
            out = []
            for i in range(len(xs) - 1):
                out.append(xs[i] + xs[i + 1])
            return out
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["off_by_one"])]
    assert pairs == [
        ("range(len(xs) - 1)", "range(len(xs))"),
        ("range(len(xs) - 1)", "range(len(xs) - 2)"),
        ("xs[i]", "xs[i + 1]"),
        ("xs[i]", "xs[i - 1]"),
        ("xs[i + 1]", "xs[i + 2]"),
        ("xs[i + 1]", "xs[i]"),
    ]
    stop = apply_mutation(source, pick(source, "off_by_one", "range(len(xs) - 1)", "range(len(xs) - 2)"))
    assert stop == source.replace("range(len(xs) - 1)", "range(len(xs) - 2)")
    assert call(source, "pair_sums", [1, 2, 3]) == [3, 5]
    assert call(stop, "pair_sums", [1, 2, 3]) == [3]
    index = apply_mutation(source, pick(source, "off_by_one", "xs[i]", "xs[i - 1]"))
    assert index == source.replace("(xs[i] +", "(xs[i - 1] +")
    assert call(index, "pair_sums", [1, 2, 3]) == [5, 4]


def test_invert_condition_is_readable() -> None:
    source = src("""
        def classify(x, ready, quiet):
            while not ready:
                ready = True
            if x > 0:
                return "pos" if quiet else "POS"
            elif ready:
                return "zero"
            return "neg"
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["invert_condition"])]
    assert pairs == [
        ("not ready", "ready"),
        ("x > 0", "not (x > 0)"),
        ("quiet", "not quiet"),
        ("ready", "not ready"),
    ]
    mutated = apply_mutation(source, pick(source, "invert_condition", "x > 0", "not (x > 0)"))
    assert mutated == source.replace("if x > 0:", "if not (x > 0):")
    assert call(source, "classify", 1, False, True) == "pos"
    assert call(mutated, "classify", 1, False, True) == "zero"


def test_remove_statement_keeps_comments_and_fills_empty_blocks() -> None:
    mutation = pick(COUNT_BELOW, "remove_statement", "count += 1  # one more", "")
    mutated = apply_mutation(COUNT_BELOW, mutation)
    assert mutated == COUNT_BELOW.replace("count += 1  # one more", "pass")
    assert call(mutated, "count_below", [1, 2, 3], 3) == 0

    source = src("""
        def pop_first(stack):
            # remember the head
            item = stack[0]
            # drop it from the stack
            del stack[0]
            stack.append(None)
            return item
    """)
    removed = apply_mutation(source, pick(source, "remove_statement", "item = stack[0]", ""))
    assert removed == source.replace("    item = stack[0]\n", "")
    with pytest.raises(NameError):
        call(removed, "pop_first", [1])
    originals = [m.original for m in find_mutations(source, kinds=["remove_statement"])]
    # The final return and `del` are never removed.
    assert originals == ["item = stack[0]", "stack.append(None)"]
    appended = apply_mutation(source, pick(source, "remove_statement", "stack.append(None)", ""))
    assert "# drop it from the stack\n    del stack[0]\n    return item" in appended


def test_remove_statement_whole_block_and_early_return() -> None:
    source = src('''
        def first_even(values):
            """Docstring stays."""
            for value in values:
                if value % 2 == 0:
                    return value
            return None
    ''')
    removals = find_mutations(source, kinds=["remove_statement"])
    assert [(m.line, m.end_line) for m in removals] == [(3, 5), (4, 5), (5, 5)]
    loop = apply_mutation(source, removals[0])
    assert loop == src('''
        def first_even(values):
            """Docstring stays."""
            return None
    ''')
    early = apply_mutation(source, removals[2])
    assert call(source, "first_even", [1, 4]) == 4
    assert call(early, "first_even", [1, 4]) is None


def test_wrong_return_prefers_recent_locals_then_parameters() -> None:
    source = src("""
        def normalise(self, raw, scale):
            cleaned = raw.strip()
            result = cleaned.lower()
            return result
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["wrong_return"])]
    assert pairs == [
        ("return result", "return cleaned"),
        ("return result", "return raw"),
        ("return result", "return scale"),
    ]
    mutated = apply_mutation(source, find_mutations(source, kinds=["wrong_return"])[0])
    assert mutated == source.replace("return result", "return cleaned")
    assert call(source, "normalise", None, " Ab ", 1) == "ab"
    assert call(mutated, "normalise", None, " Ab ", 1) == "Ab"


def test_wrong_return_ignores_globals_and_later_assignments() -> None:
    source = src("""
        LIMIT = 3

        def f(a):
            if a:
                return LIMIT
            b = a
            return a
    """)
    pairs = [(m.original, m.mutated) for m in find_mutations(source, kinds=["wrong_return"])]
    assert pairs == [("return a", "return b")]


UNTOUCHABLE = src('''
    """Module docstring: 1 + 1 < 3."""
    LIMIT = 3 + 4
    if LIMIT > 2:
        LIMIT -= 1


    def deco(n):
        return lambda f: f


    class Config:
        """Class docstring."""
        size = 2 * 8
        flag = True

        @deco(5 - 1)
        def method(self, scale: list[int] = [1 + 2], *, strict=not False) -> dict[str, int]:
            """Return 2 + 2 if x < y."""
            return [scale, strict]

        def __repr__(self):
            return "Config(" + str(self.size * 2) + ")"

        def later(self):
            """Not yet."""
            raise NotImplementedError("later")


    def stub(x=1 if LIMIT else 2):
        ...
''')


def test_module_class_decorator_default_annotation_and_docstring_code_is_untouched() -> None:
    assert find_mutations(UNTOUCHABLE) == []


def test_nested_functions_and_methods_get_qualified_names() -> None:
    source = src("""
        class Box:
            size = 1 + 1

            def grow(self, n):
                def step(k):
                    return k + 1
                return step(n) * 2
    """)
    functions = Counter(m.function for m in find_mutations(source, kinds=["flip_arithmetic"]))
    assert functions == {"Box.grow.step": 1, "Box.grow": 1}


def test_find_mutations_is_deterministic_and_indexed_in_source_order() -> None:
    first = find_mutations(EXAMPLE, "pkg/inventory.py")
    assert first == find_mutations(EXAMPLE, "pkg/inventory.py")
    for kind in MUTATION_KINDS:
        of_kind = [m for m in first if m.kind == kind]
        assert [m.site for m in of_kind] == list(range(len(of_kind)))
        assert [m.line for m in of_kind] == sorted(m.line for m in of_kind)
    assert {m.path for m in first} == {"pkg/inventory.py"}


def test_kinds_filter_restricts_results() -> None:
    only = find_mutations(EXAMPLE, kinds=["off_by_one"])
    assert only and {m.kind for m in only} == {"off_by_one"}
    assert only == [m for m in find_mutations(EXAMPLE) if m.kind == "off_by_one"]
    with pytest.raises(MutationError, match="no_such_kind"):
        find_mutations(EXAMPLE, kinds=["no_such_kind"])


def test_unparsable_source_raises_naming_the_path() -> None:
    with pytest.raises(MutationError, match=r"broken\.py"):
        find_mutations("def f(:\n    return 1\n", "broken.py")
    mutation = find_mutations(COUNT_BELOW, "ok.py")[0]
    with pytest.raises(MutationError, match=r"ok\.py"):
        apply_mutation("def f(:\n", mutation)


def test_stale_mutation_is_refused() -> None:
    mutation = pick(COUNT_BELOW, "flip_comparison", "value < limit", "value <= limit")
    edited = COUNT_BELOW.replace("value < limit", "value > limit")
    with pytest.raises(MutationError, match=r"mod\.py.*stale"):
        apply_mutation(edited, mutation)
    with pytest.raises(MutationError, match="stale"):
        apply_mutation(COUNT_BELOW, replace(mutation, site=mutation.site + 50))
    with pytest.raises(MutationError, match="stale"):
        apply_mutation(COUNT_BELOW, replace(mutation, mutated="value == limit"))


EXAMPLE = src('''
    """Inventory helpers."""

    from dataclasses import dataclass

    LIMIT = 10


    @dataclass
    class Item:
        name: str
        price: float
        count: int = 1

        def total(self) -> float:
            """Price of all units."""
            return self.price * self.count

        def __repr__(self) -> str:
            return f"Item({self.name!r}, {self.price + 0})"


    def restock(items, amount=LIMIT + 1):
        """Add `amount` units to every item that runs low."""
        # items below the limit get topped up
        for item in items:
            if item.count < LIMIT and item.name:
                item.count += amount
        return items


    def window_sum(values: list[int], width: int = 3) -> list[int]:
        sums = []
        for start in range(len(values) - width + 1):
            acc = 0
            for offset in range(width):
                acc += values[start + offset]
            sums.append(acc)  # one window done
        return sums


    def find_index(values, target):
        low, high = 0, len(values) - 1
        while low <= high:
            middle = (low + high) // 2
            if values[middle] == target:
                return middle
            elif values[middle] < target:
                low = middle + 1
            else:
                high = middle - 1
                # keep searching left
        return -1


    def describe(count, verbose=False):
        label = "many" if count > 1 else "one"
        if not verbose:
            return label
        return f"{label} ({count}) {values_tail([count, 2.5])}"


    def values_tail(values):
        return values[1:] if values else values[:len(values) - 1]
''')


def assert_applies_within_its_lines(source: str, mutation: Mutation) -> None:
    """The mutated file parses and differs from `source` only in lines line..end_line."""
    mutated = apply_mutation(source, mutation)
    ast.parse(mutated)
    before, after = source.splitlines(keepends=True), mutated.splitlines(keepends=True)
    kept_tail = len(before) - mutation.end_line
    assert after[: mutation.line - 1] == before[: mutation.line - 1], mutation
    assert after[len(after) - kept_tail :] == before[mutation.end_line :], mutation
    changed = after[mutation.line - 1 : len(after) - kept_tail]
    if mutation.kind == "remove_statement":  # every reported line is gone, or became one `pass`
        assert [line.strip() for line in changed] in ([], ["pass"]), (mutation, changed)
        return
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    assert changes, mutation
    for _tag, start, end, _new_start, _new_end in changes:
        assert mutation.line - 1 <= start and end <= mutation.end_line, (mutation, changes)
    assert mutation.mutated.splitlines()[0] in "".join(changed), mutation


def test_every_mutation_of_the_example_parses_and_changes_only_its_lines() -> None:
    mutations = find_mutations(EXAMPLE, "inventory.py")
    assert len(mutations) > 90
    for mutation in mutations:
        assert_applies_within_its_lines(EXAMPLE, mutation)


def test_example_counts_per_kind() -> None:
    counts = Counter(m.kind for m in find_mutations(EXAMPLE))
    assert counts == {
        "flip_comparison": 5,
        "flip_arithmetic": 13,
        "swap_operands": 9,
        "change_constant": 24,
        "off_by_one": 12,
        "invert_condition": 7,
        "remove_statement": 19,
        "wrong_return": 10,
    }


TRICKY = src("""
    import asyncio


    async def tricky(a, b, c, xs, flag):
        if(a):
            b = a ** b ** c; c = 0x1F + 1_000  # two statements on one line
        while(a<b and not flag):
            a += -2.5
        total = (a -
                 b)  # operands on two lines
        pick = [x[-1] for x in xs if (n := len(x)) > 0]
        fn = lambda y, z=1 + 1: y - z
        label = f"{a - b:>{c}} {xs[n - 1]}"
        if a is not None and b in xs[1:len(xs) - 1]:
            class Local:
                size = 1 + 2

                def grow(self):
                    return self.size * 2
            await asyncio.sleep(0)
        def one_liner(q): return q - 1
        return total if flag else pick, fn, label, one_liner, Local
""")


def test_odd_formatting_still_gives_parsable_mutations_confined_to_their_lines() -> None:
    mutations = find_mutations(TRICKY, "tricky.py")
    assert {m.kind for m in mutations} == set(MUTATION_KINDS) - {"wrong_return"}
    assert {m.function for m in mutations} == {"tricky", "tricky.Local.grow", "tricky.one_liner"}
    originals = {(m.kind, m.original, m.mutated) for m in mutations}
    assert ("invert_condition", "(a)", "(not a)") in originals
    assert ("swap_operands", "b ** c", "c ** b") in originals
    assert ("swap_operands", "a ** b ** c", "(b ** c) ** a") in originals
    assert ("change_constant", "0x1F", "0x20") in originals
    assert ("change_constant", "-2.5", "-1.5") in originals
    assert ("off_by_one", "xs[n - 1]", "xs[n]") in originals
    assert ("off_by_one", "xs[1:len(xs) - 1]", "xs[1:len(xs) - 2]") in originals
    lines = TRICKY.splitlines()
    lambda_line = 1 + next(i for i, line in enumerate(lines) if "lambda" in line)
    class_body_line = 1 + next(i for i, line in enumerate(lines) if "size = 1 + 2" in line)
    on_lambda_line = {(m.kind, m.original) for m in mutations if m.line == lambda_line}
    # The lambda's default `1 + 1` is not a site; its body `y - z` is.
    assert on_lambda_line == {
        ("remove_statement", "fn = lambda y, z=1 + 1: y - z"),
        ("flip_arithmetic", "y - z"),
        ("swap_operands", "y - z"),
    }
    assert not [m for m in mutations if m.line == class_body_line]
    for mutation in mutations:
        assert_applies_within_its_lines(TRICKY, mutation)
