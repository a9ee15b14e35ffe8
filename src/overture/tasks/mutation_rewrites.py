"""libcst node rewrites for `overture.tasks.mutations`: operator tables and small pure builders.

Nothing here walks a whole file: each function takes a node (or a block, or a chain of ancestors)
and returns the rewritten node. The rules they implement are documented in
`overture.tasks.mutations`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import libcst as cst

COMPARISON_FLIPS: dict[type[cst.BaseCompOp], type[cst.BaseCompOp]] = {
    cst.LessThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.LessThan,
    cst.GreaterThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.GreaterThan,
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
}
ARITHMETIC_FLIPS: dict[type[cst.BaseBinaryOp], type[cst.BaseBinaryOp]] = {
    cst.Add: cst.Subtract,
    cst.Subtract: cst.Add,
    cst.Multiply: cst.Divide,
    cst.Divide: cst.Multiply,
    cst.FloorDivide: cst.Divide,
    cst.Modulo: cst.FloorDivide,
    cst.Power: cst.Multiply,
}
AUGMENTED_FLIPS: dict[type[cst.BaseAugOp], type[cst.BaseAugOp]] = {
    cst.AddAssign: cst.SubtractAssign,
    cst.SubtractAssign: cst.AddAssign,
    cst.MultiplyAssign: cst.DivideAssign,
    cst.DivideAssign: cst.MultiplyAssign,
    cst.FloorDivideAssign: cst.DivideAssign,
    cst.ModuloAssign: cst.FloorDivideAssign,
    cst.PowerAssign: cst.MultiplyAssign,
}
NON_COMMUTATIVE_OPS = (cst.Subtract, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power, cst.LeftShift,
                       cst.RightShift)  # fmt: skip
ORDERING_COMPARISONS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
BINARY_PRECEDENCE: dict[type[cst.BaseBinaryOp], int] = {
    cst.BitOr: 1, cst.BitXor: 2, cst.BitAnd: 3, cst.LeftShift: 4, cst.RightShift: 4, cst.Add: 5,
    cst.Subtract: 5, cst.Multiply: 6, cst.MatrixMultiply: 6, cst.Divide: 6, cst.FloorDivide: 6,
    cst.Modulo: 6, cst.Power: 7,
}  # fmt: skip
ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
STRING_LITERALS = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)

_SYMBOL_MODULE = cst.Module(body=[])


def symbol(operator: cst.CSTNode) -> str:
    """`<=`, `not in`, `+=`: the operator without its surrounding whitespace."""
    return " ".join(_SYMBOL_MODULE.code_for_node(operator).split())


def is_string_expression(node: cst.CSTNode) -> bool:
    """A string literal, or a `+`/`%` expression built on one (`"a" + b + c`)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Modulo)):
        return is_string_expression(node.left) or is_string_expression(node.right)
    return isinstance(node, STRING_LITERALS)


def integer_value(node: cst.Integer) -> int:
    return int(node.value.replace("_", ""), 0)


def int_literal_value(node: cst.BaseExpression) -> int | None:
    """The value of `3` or `-3` (unparenthesized minus), else None."""
    if isinstance(node, cst.Integer):
        return integer_value(node)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
        and not node.expression.lpar
    ):
        return -integer_value(node.expression)
    return None


def number_literal(value: float, like: str = "") -> cst.BaseExpression:
    """A literal for `value`, negative ones as unary minus, keeping a hex/octal/binary prefix of `like`."""
    magnitude = abs(value)
    literal: cst.BaseExpression
    if isinstance(value, float):
        literal = cst.Float(repr(magnitude))
    else:
        render = {"0x": hex, "0o": oct, "0b": bin}.get(like[:2].lower(), str)
        literal = cst.Integer(render(magnitude))
    return cst.UnaryOperation(cst.Minus(), literal) if value < 0 else literal


def flipped_comparison(operator: cst.BaseCompOp) -> cst.BaseCompOp:
    flipped_type = COMPARISON_FLIPS[type(operator)]
    before, after = operator.whitespace_before, operator.whitespace_after
    if flipped_type in (cst.NotIn, cst.IsNot):
        between = cst.SimpleWhitespace(" ")
        return flipped_type(whitespace_before=before, whitespace_between=between, whitespace_after=after)
    return flipped_type(whitespace_before=before, whitespace_after=after)


def flipped_operator(operator: cst.CSTNode, new_type: type) -> cst.CSTNode:
    """An operator of `new_type` with the whitespace of `operator`."""
    before, after = operator.whitespace_before, operator.whitespace_after
    return new_type(whitespace_before=before, whitespace_after=after)


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def parenthesize_unless_tighter(expr: cst.BaseExpression, precedence: int) -> cst.BaseExpression:
    """Parentheses around `expr` unless it already binds tighter than an operator of `precedence`."""
    if expr.lpar or isinstance(expr, ATOMS):
        return expr
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not) and precedence < 7:
        return expr
    if isinstance(expr, cst.BinaryOperation) and BINARY_PRECEDENCE[type(expr.operator)] > precedence:
        return expr
    return parenthesized(expr)


def shift_by_one(expr: cst.BaseExpression, delta: int) -> cst.BaseExpression:
    """`expr + 1` / `expr - 1`, folded into an existing `E + k` / `E - k`."""
    if (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, (cst.Add, cst.Subtract))
        and not expr.lpar
        and isinstance(expr.right, cst.Integer)
        and not expr.right.lpar
    ):
        sign = 1 if isinstance(expr.operator, cst.Add) else -1
        offset = sign * integer_value(expr.right) + delta
        if offset == 0:
            return expr.left
        operator = flipped_operator(expr.operator, cst.Add if offset > 0 else cst.Subtract)
        return expr.with_changes(operator=operator, right=cst.Integer(str(abs(offset))))
    operator = cst.Add() if delta > 0 else cst.Subtract()
    # `+`/`-` are left-associative, so an unparenthesized `a - b` needs no parentheses before `+ 1`.
    left = parenthesize_unless_tighter(expr, 4)
    return cst.BinaryOperation(left=left, operator=operator, right=cst.Integer(str(abs(delta))))


def swapped_operands(node: cst.BinaryOperation) -> cst.BinaryOperation:
    precedence = BINARY_PRECEDENCE[type(node.operator)]
    return node.with_changes(
        left=parenthesize_unless_tighter(node.right, precedence),
        right=parenthesize_unless_tighter(node.left, precedence),
    )


def swapped_comparison(node: cst.Comparison) -> cst.Comparison:
    (target,) = node.comparisons
    return node.with_changes(left=target.comparator, comparisons=[target.with_changes(comparator=node.left)])


def negated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`not c` for a simple c, `not (c)` otherwise; `not c` becomes `c`."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not) and not expr.lpar:
        return expr.expression
    bare = expr.with_changes(lpar=[], rpar=[]) if expr.lpar else expr
    negation = cst.UnaryOperation(cst.Not(), bare if isinstance(bare, ATOMS) else parenthesized(bare))
    # Keep the test's own parentheses outside: `if(x):` must not become `ifnot x:`.
    return negation.with_changes(lpar=expr.lpar, rpar=expr.rpar) if expr.lpar else negation


def bound_names(target: cst.CSTNode) -> list[str]:
    """Names an assignment target binds (`a`, `a, (b, *c)`); attributes and subscripts bind none."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in bound_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return bound_names(target.value)
    return []


def _is_stub_statement(statement: cst.BaseSmallStatement) -> bool:
    if isinstance(statement, cst.Pass):
        return True
    if isinstance(statement, cst.Expr):
        return isinstance(statement.value, (cst.Ellipsis, *STRING_LITERALS))
    if isinstance(statement, cst.Raise) and statement.exc is not None:
        exc = statement.exc.func if isinstance(statement.exc, cst.Call) else statement.exc
        return isinstance(exc, cst.Name) and exc.value == "NotImplementedError"
    return False


def is_stub_body(body: cst.BaseSuite) -> bool:
    """Only a docstring, `pass`, `...` or `raise NotImplementedError`."""
    if isinstance(body, cst.SimpleStatementSuite):
        return all(_is_stub_statement(s) for s in body.body)
    return all(
        isinstance(line, cst.SimpleStatementLine) and all(_is_stub_statement(s) for s in line.body)
        for line in body.body
    )


def block_without(block: cst.IndentedBlock, index: int) -> tuple[cst.IndentedBlock, bool]:
    """`block` minus statement `index`, the comments above it kept; True if `pass` had to stand in."""
    body = list(block.body)
    removed = body.pop(index)
    comments = tuple(removed.leading_lines)
    if not body:
        return block.with_changes(body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=comments)]), True
    if index < len(body):
        following = body[index]
        body[index] = following.with_changes(leading_lines=(*comments, *following.leading_lines))
        return block.with_changes(body=body), False
    return block.with_changes(body=body, footer=(*comments, *block.footer)), False


def replace_in_tree(
    ancestors: Sequence[cst.CSTNode], target: cst.CSTNode, replacement: cst.CSTNode
) -> cst.CSTNode:
    """The root of `ancestors` (outermost first, ending at `target`'s parent) with `target` replaced.

    Rebuilds only the chain of ancestors instead of walking the whole tree.
    """
    old, new = target, replacement
    for parent in reversed(ancestors):
        old, new = parent, _with_child_replaced(parent, old, new)
    return new


def _with_child_replaced(parent: cst.CSTNode, old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    for child_field in dataclasses.fields(parent):
        value = getattr(parent, child_field.name)
        if value is old:
            return parent.with_changes(**{child_field.name: new})
        if isinstance(value, (tuple, list)) and any(item is old for item in value):
            items = [new if item is old else item for item in value]
            return parent.with_changes(**{child_field.name: items})
    raise LookupError(f"{type(old).__name__} is not a direct child of {type(parent).__name__}")
