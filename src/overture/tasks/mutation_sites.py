"""Finding mutation sites in a libcst tree: the visitor behind `overture.tasks.mutations`.

A `Site` is one concrete change: the node replaced (`target`), what replaces it, the node whose
source is reported as the changed code (`anchor`), and the chain of ancestors needed to rebuild
the tree around it. `collect_sites` walks only the bodies of functions and methods, in source
order. Texts (original, mutated, description) are rendered lazily, so applying one mutation does
not pay for rendering all of them. The rules are documented in `overture.tasks.mutations`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from overture.tasks import mutation_rewrites as rw

MUTATION_KINDS: tuple[str, ...] = (
    "flip_comparison",
    "flip_arithmetic",
    "swap_operands",
    "change_constant",
    "off_by_one",
    "invert_condition",
    "remove_statement",
    "wrong_return",
)
SKIPPED_FUNCTIONS = frozenset({"__repr__", "__str__"})
MAX_WRONG_RETURNS = 3
TYPE_LIKE_NAMES = frozenset(
    ["int", "str", "float", "bool", "bytes", "object", "list", "dict", "tuple", "set", "frozenset", "type"]
)


@dataclass(frozen=True)
class Site:
    kind: str
    function: str
    anchor: cst.CSTNode
    target: cst.CSTNode
    replacement: cst.CSTNode
    ancestors: tuple[cst.CSTNode, ...] = field(repr=False)
    render: Callable[[], tuple[str, str, str]] = field(repr=False)  # (original, mutated, description)

    @cached_property
    def texts(self) -> tuple[str, str, str]:
        return self.render()

    @property
    def original(self) -> str:
        return self.texts[0]

    @property
    def mutated(self) -> str:
        return self.texts[1]

    @property
    def description(self) -> str:
        return self.texts[2]

    def applied(self) -> cst.Module:
        """The whole module with this site's change made."""
        module = rw.replace_in_tree(self.ancestors, self.target, self.replacement)
        assert isinstance(module, cst.Module)
        return module


@dataclass
class _Scope:
    name: str
    is_function: bool
    body: cst.BaseSuite | None = None
    parameters: list[str] = field(default_factory=list)
    assigned: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Slot:
    """Where a statement sits: its block, its index there, and whether that is the function body."""

    block: cst.IndentedBlock
    index: int
    in_function_body: bool


def collect_sites(module: cst.Module, kinds: Iterable[str] = MUTATION_KINDS) -> list[Site]:
    collector = SiteCollector(module, kinds)
    module.visit(collector)
    return collector.sites


def _is_removable(statement: cst.BaseStatement, slot: _Slot) -> bool:
    if isinstance(statement, (cst.If, cst.For, cst.While)):
        return True
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, (cst.Assign, cst.AugAssign)):
        return True
    if isinstance(small, cst.AnnAssign):
        return small.value is not None
    if isinstance(small, cst.Expr):
        return not isinstance(small.value, (cst.Ellipsis, cst.Yield, *rw.STRING_LITERALS))
    if isinstance(small, cst.Return):
        return not (slot.in_function_body and slot.index == len(slot.block.body) - 1)
    return False


def _adjustable_bounds(slice_: cst.BaseSlice) -> Sequence[tuple[str, cst.BaseExpression]]:
    """(field, expression) pairs of an index or of slice bounds that off_by_one may shift."""
    if isinstance(slice_, cst.Index):
        value = slice_.value
        simple = isinstance(value, (cst.Name, cst.Attribute)) or (
            isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract))
        )
        looks_like_type = isinstance(value, cst.Name) and (
            value.value in TYPE_LIKE_NAMES or value.value[:1].isupper()
        )
        return [("value", value)] if slice_.star is None and simple and not looks_like_type else []
    if isinstance(slice_, cst.Slice):
        bounds = (("lower", slice_.lower), ("upper", slice_.upper))
        shiftable = (cst.Name, cst.Attribute, cst.Call, cst.BinaryOperation)
        return [(name, bound) for name, bound in bounds if isinstance(bound, shiftable)]
    return []


class SiteCollector(cst.CSTVisitor):
    """Collects sites in source order; only inside function bodies, never in annotations or defaults."""

    def __init__(self, module: cst.Module, kinds: Iterable[str]) -> None:
        super().__init__()
        self.module = module
        self.kinds = frozenset(kinds)
        self.sites: list[Site] = []
        self._scopes: list[_Scope] = []
        self._slots: dict[int, _Slot] = {}
        self._ancestors: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._ancestors.append(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self._ancestors.pop()

    # -- scopes ---------------------------------------------------------------------------------

    @property
    def _function(self) -> _Scope | None:
        return self._scopes[-1] if self._scopes and self._scopes[-1].is_function else None

    def _wants(self, kind: str) -> bool:
        return kind in self.kinds and self._function is not None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        name = node.name.value
        if name in SKIPPED_FUNCTIONS or rw.is_stub_body(node.body):
            return False
        params = node.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
        parameters = [p.name.value for p in every if p.name.value not in ("self", "cls")]
        self._enter(_Scope(name, True, node.body, parameters), node.body)
        return False  # decorators, parameters (defaults) and the return annotation are not sites

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._enter(_Scope(node.name.value, False), node.body)
        return False

    def _enter(self, scope: _Scope, body: cst.BaseSuite) -> None:
        self._scopes.append(scope)
        body.visit(self)
        self._scopes.pop()

    def visit_Parameters(self, node: cst.Parameters) -> bool:
        return False

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    # -- bookkeeping for remove_statement and wrong_return --------------------------------------

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        function = self._function
        if function is not None:
            for index, statement in enumerate(node.body):
                self._slots[id(statement)] = _Slot(node, index, node is function.body)

    def _record_binding(self, target: cst.CSTNode) -> None:
        function = self._function
        if function is not None:
            function.assigned.extend(n for n in rw.bound_names(target) if n not in function.assigned)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._record_binding(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record_binding(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._record_binding(node.target)
        operator_type = type(node.operator)
        if operator_type in rw.AUGMENTED_FLIPS and not rw.is_string_expression(node.value):
            flipped = rw.flipped_operator(node.operator, rw.AUGMENTED_FLIPS[operator_type])
            self._add_operator_flip(node, node.with_changes(operator=flipped), node.operator, flipped)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._record_binding(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._record_binding(node.asname.name)

    # -- statements -----------------------------------------------------------------------------

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._add_removal(node)

    def visit_If(self, node: cst.If) -> None:
        self._add_removal(node)
        self._add_inversion(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._add_removal(node)
        self._add_inversion(node.test)

    def visit_For(self, node: cst.For) -> None:
        self._record_binding(node.target)
        self._add_removal(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._add_inversion(node.test)

    def visit_Return(self, node: cst.Return) -> None:
        function = self._function
        if not self._wants("wrong_return") or function is None or not isinstance(node.value, cst.Name):
            return
        returned = node.value.value
        if returned not in function.parameters and returned not in function.assigned:
            return
        nearest_first = dict.fromkeys([*reversed(function.assigned), *function.parameters])
        others = [name for name in nearest_first if name not in (returned, "self", "cls")]
        for other in others[:MAX_WRONG_RETURNS]:
            replacement = node.with_changes(value=node.value.with_changes(value=other))
            self._add("wrong_return", node, replacement, f"return {other} instead of {returned}")

    # -- expressions ----------------------------------------------------------------------------

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self._wants("flip_comparison"):
            for index, target in enumerate(node.comparisons):
                flipped = rw.flipped_comparison(target.operator)
                targets = list(node.comparisons)
                targets[index] = target.with_changes(operator=flipped)
                description = f"flip comparison {rw.symbol(target.operator)} to {rw.symbol(flipped)}"
                self._add("flip_comparison", node, node.with_changes(comparisons=targets), description)
        if len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, rw.ORDERING_COMPARISONS):
            (target,) = node.comparisons
            self._add_swap(node, node.left, target.comparator, rw.swapped_comparison(node), target.operator)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if rw.is_string_expression(node.left) or rw.is_string_expression(node.right):
            return
        operator_type = type(node.operator)
        if operator_type in rw.ARITHMETIC_FLIPS:
            flipped = rw.flipped_operator(node.operator, rw.ARITHMETIC_FLIPS[operator_type])
            self._add_operator_flip(node, node.with_changes(operator=flipped), node.operator, flipped)
        if isinstance(node.operator, rw.NON_COMMUTATIVE_OPS):
            self._add_swap(node, node.left, node.right, rw.swapped_operands(node), node.operator)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        flipped_type = cst.Or if isinstance(node.operator, cst.And) else cst.And
        flipped = rw.flipped_operator(node.operator, flipped_type)
        self._add_operator_flip(node, node.with_changes(operator=flipped), node.operator, flipped)

    def visit_Integer(self, node: cst.Integer) -> None:
        self._add_constant_changes(node, rw.integer_value(node), node.value)

    def visit_Float(self, node: cst.Float) -> None:
        self._add_constant_changes(node, float(node.value.replace("_", "")), node.value)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> bool:
        value: float | None = rw.int_literal_value(node)
        if value is None and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Float):
            value = -float(node.expression.value.replace("_", ""))
        if value is None:
            return True
        self._add_constant_changes(node, value, getattr(node.expression, "value", ""))
        return False  # `-1` is one constant, not a minus and a `1`

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False"):
            other = "False" if node.value == "True" else "True"
            description = f"change constant {node.value} to {other}"
            self._add("change_constant", node, node.with_changes(value=other), description)

    def visit_Call(self, node: cst.Call) -> None:
        if not (self._wants("off_by_one") and isinstance(node.func, cst.Name) and node.func.value == "range"):
            return
        args = node.args
        if not 1 <= len(args) <= 3 or any(arg.keyword is not None or arg.star for arg in args):
            return
        stop_index = 0 if len(args) == 1 else 1
        stop = args[stop_index].value
        if rw.int_literal_value(stop) is not None:
            return  # a literal stop is change_constant's
        for delta in (1, -1):
            new_args = list(args)
            new_args[stop_index] = args[stop_index].with_changes(value=rw.shift_by_one(stop, delta))
            self._add_off_by_one(node, node.with_changes(args=new_args), "range stop", delta)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not self._wants("off_by_one"):
            return
        if isinstance(node.value, cst.Name) and node.value.value in TYPE_LIKE_NAMES:
            return
        for index, element in enumerate(node.slice):
            for field_name, bound in _adjustable_bounds(element.slice):
                for delta in (1, -1):
                    shifted = element.slice.with_changes(**{field_name: rw.shift_by_one(bound, delta)})
                    elements = list(node.slice)
                    elements[index] = element.with_changes(slice=shifted)
                    what = "index" if field_name == "value" else f"slice {field_name} bound"
                    self._add_off_by_one(node, node.with_changes(slice=elements), what, delta)

    # -- site builders --------------------------------------------------------------------------

    def _add(
        self,
        kind: str,
        anchor: cst.CSTNode,
        replacement: cst.CSTNode,
        description: str,
        *,
        target: cst.CSTNode | None = None,
        render: Callable[[], tuple[str, str, str]] | None = None,
    ) -> None:
        """Record a site; `target` defaults to `anchor`, the texts to the rendered anchor and replacement."""
        if not self._wants(kind):
            return
        code = self.module.code_for_node
        render = render or (lambda: (code(anchor), code(replacement), description))
        target = anchor if target is None else target
        stack = self._ancestors
        depth = next((i for i, node in enumerate(stack) if node is target), len(stack))
        function = ".".join(scope.name for scope in self._scopes)
        self.sites.append(Site(kind, function, anchor, target, replacement, tuple(stack[:depth]), render))

    def _add_operator_flip(
        self, node: cst.CSTNode, replacement: cst.CSTNode, operator: cst.CSTNode, flipped: cst.CSTNode
    ) -> None:
        noun = "boolean" if isinstance(node, cst.BooleanOperation) else "arithmetic"
        description = f"flip {noun} {rw.symbol(operator)} to {rw.symbol(flipped)}"
        self._add("flip_arithmetic", node, replacement, description)

    def _add_swap(
        self,
        node: cst.BaseExpression,
        left: cst.BaseExpression,
        right: cst.BaseExpression,
        swapped: cst.BaseExpression,
        operator: cst.CSTNode,
    ) -> None:
        if not self._wants("swap_operands"):
            return
        if self.module.code_for_node(left).strip() == self.module.code_for_node(right).strip():
            return
        self._add("swap_operands", node, swapped, f"swap operands of {rw.symbol(operator)}")

    def _add_constant_changes(self, node: cst.BaseExpression, value: float, text: str) -> None:
        if not self._wants("change_constant"):
            return
        for delta in (1, -1):
            if value + delta == value:
                continue  # a float too large to move by one
            literal = rw.number_literal(value + delta, text)
            replacement = literal.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else literal
            texts = self._constant_texts(node, replacement)
            self._add("change_constant", node, replacement, "", render=texts)

    def _constant_texts(
        self, node: cst.BaseExpression, replacement: cst.BaseExpression
    ) -> Callable[[], tuple[str, str, str]]:
        def render() -> tuple[str, str, str]:
            old, new = self.module.code_for_node(node), self.module.code_for_node(replacement)
            return old, new, f"change constant {old} to {new}"

        return render

    def _add_off_by_one(
        self, node: cst.BaseExpression, replacement: cst.BaseExpression, what: str, delta: int
    ) -> None:
        self._add("off_by_one", node, replacement, f"off by one: {what} {'+' if delta > 0 else '-'} 1")

    def _add_inversion(self, test: cst.BaseExpression) -> None:
        if not self._wants("invert_condition") or isinstance(test, (cst.Integer, *rw.STRING_LITERALS)):
            return
        if isinstance(test, cst.Name) and test.value in ("True", "False", "None"):
            return
        self._add("invert_condition", test, rw.negated(test), "invert condition")

    def _add_removal(self, statement: cst.BaseStatement) -> None:
        slot = self._slots.get(id(statement))
        if slot is None or not self._wants("remove_statement") or not _is_removable(statement, slot):
            return
        new_block, with_pass = rw.block_without(slot.block, slot.index)

        def render() -> tuple[str, str, str]:
            original = self.module.code_for_node(statement.with_changes(leading_lines=())).rstrip("\n")
            headline = original.splitlines()[0].strip()
            return original, "", f"remove `{headline}`" + (" (block left with pass)" if with_pass else "")

        self._add("remove_statement", statement, new_block, "", target=slot.block, render=render)
