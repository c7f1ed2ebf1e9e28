"""Constraint expressions over tuning parameters, parsed safely.

A constraint is a Python-like boolean expression such as ``block_x * block_y <= 1024`` or
``tile_k % vec == 0 and stages >= 2``. User text is never passed to ``eval``: it is parsed with
:mod:`ast`, every node is checked against a small whitelist, and the tree is interpreted by this
module, element-wise over numpy arrays so a million candidate configs are filtered in one pass.
"""

from __future__ import annotations

import ast
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelfarm.core.errors import ConstraintError

MAX_EXPRESSION_LENGTH = 500
MAX_NODES = 200
MAX_INTEGER = 2**63 - 1  # constants must fit numpy's int64 columns

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": np.minimum,
    "max": np.maximum,
    "abs": np.abs,
}


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint. ``evaluate`` works on scalars and on numpy arrays alike."""

    text: str
    tree: ast.Expression
    names: frozenset[str]

    def evaluate(self, values: Mapping[str, Any]) -> Any:
        """The constraint's truth value(s) for ``values`` (scalars or equally long arrays).

        Raises:
            ConstraintError: when a name has no value, or the values do not support the
                expression (e.g. arithmetic on a string parameter).
        """
        result, failed = self.evaluate_parts(values)
        if not np.any(failed):
            return result
        valid = np.logical_and(result, np.logical_not(failed))  # a config that divides by zero is invalid
        return valid if _is_array(valid) else bool(valid)

    def evaluate_parts(self, values: Mapping[str, Any]) -> tuple[Any, Any]:
        """(holds, divides by zero): the expression's value and where it divided by zero, apart; what
        ``evaluate`` combines, and what an empty space's error needs to say why a constraint left
        nothing (raises as ``evaluate`` does)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            try:
                return _interpret(self.tree.body, values)
            except KeyError as exc:
                raise ConstraintError(f"constraint {self.text!r} needs a value for {exc.args[0]!r}") from None
            except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
                # ZeroDivisionError: none is known to reach here (a zero divisor is a failed config);
                # a 422 with the reason if one does, never a 500.
                raise ConstraintError(f"constraint {self.text!r} cannot be evaluated: {exc}") from None


def parse_constraint(text: str, allowed_names: set[str] | frozenset[str]) -> Constraint:
    """Parse ``text`` into a :class:`Constraint`.

    Args:
        text: the expression.
        allowed_names: the parameter (and problem) names it may refer to.

    Raises:
        ConstraintError: on syntax errors, unknown names, or any construct outside the whitelist
            (attribute access, subscripts, lambdas, comprehensions, calls other than min/max/abs, ...).
    """
    if not isinstance(text, str) or not text.strip():
        raise ConstraintError("a constraint must be a non-empty string")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ConstraintError(f"constraint longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": user text must not spam logs
            warnings.simplefilter("ignore")
            tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"cannot parse constraint {text!r}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError, OverflowError):  # e.g. NUL bytes, deep nesting
        raise ConstraintError(f"cannot parse constraint {text!r}") from None
    names: set[str] = set()
    count = 0
    for node in ast.walk(tree):
        count += 1
        _check_node(node, text, allowed_names, names)
    if count > MAX_NODES:
        raise ConstraintError(f"constraint {text!r} is too complex")
    return Constraint(text=text.strip(), tree=tree, names=frozenset(names))


def _check_node(node: ast.AST, text: str, allowed: set[str] | frozenset[str], names: set[str]) -> None:
    if isinstance(node, ast.Name):
        if node.id in _FUNCTIONS:
            return
        if node.id not in allowed:
            raise ConstraintError(f"constraint {text!r} refers to unknown name {node.id!r}")
        names.add(node.id)
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ConstraintError(f"constraint {text!r}: only numeric constants are allowed")
        if isinstance(node.value, int) and abs(node.value) > MAX_INTEGER:
            raise ConstraintError(f"constraint {text!r}: integer constant out of range")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
            raise ConstraintError(f"constraint {text!r}: only min(), max() and abs() may be called")
        arity_ok = len(node.args) == 1 if node.func.id == "abs" else len(node.args) >= 2
        if not arity_ok:
            raise ConstraintError(f"constraint {text!r}: abs() takes one argument, min() and max() two or more")
        return
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        raise ConstraintError(f"constraint {text!r}: operator {type(node.op).__name__} is not allowed")
    if isinstance(node, ast.Compare) and any(type(op) not in _COMPARE for op in node.ops):
        raise ConstraintError(f"constraint {text!r}: only ==, !=, <, <=, >, >= comparisons are allowed")
    allowed_types = (
        ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
        ast.BinOp, ast.Compare, ast.Load, ast.IfExp, *_BINARY, *_COMPARE,
    )  # fmt: skip
    if not isinstance(node, allowed_types):
        raise ConstraintError(f"constraint {text!r}: {type(node).__name__} is not allowed")


def _interpret(node: ast.expr, values: Mapping[str, Any]) -> tuple[Any, Any]:
    """(value, failed): ``failed`` is where Python itself would have raised ZeroDivisionError (a bool, or
    a bool array over the configs), evaluating as Python does: ``and``, ``or``, chained comparisons
    and ``if``/``else`` evaluate an operand only where the ones before it call for it.

    Why: a division by zero makes a config invalid, but only where Python would have reached it. The
    interpreter evaluated every operand everywhere, and a single config's Python ints raised at the
    first zero divisor: ``x == 0 or 12 % x == 0`` held for x = 0 over an array (numpy's 12 % 0 is 0)
    and not for that config alone, so a config the enumeration kept was refused by ``contains``; and a
    zero division by constants anywhere refused every config (a fuzzed case: CI, 2026-11-29)."""
    if isinstance(node, ast.Constant):
        return node.value, False
    if isinstance(node, ast.Name):
        return values[node.id], False
    if isinstance(node, ast.BinOp):
        (left, left_failed), (right, right_failed) = _interpret(node.left, values), _interpret(node.right, values)
        failed = np.logical_or(left_failed, right_failed)
        if isinstance(node.op, ast.Pow):
            # In floating point: Python ints would compute 10 ** 10 ** 9 exactly (a denial of
            # service), integer arrays refuse negative powers, and (-8) ** 0.5 is complex.
            base, exponent = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
            failed = np.logical_or(failed, np.logical_and(base == 0, exponent < 0))  # 0 ** -1
            return np.power(base, exponent), failed
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and _numeric(right):
            zero = np.asarray(right) == 0
            return _BINARY[type(node.op)](left, _select(zero, 1, right)), np.logical_or(failed, zero)
        return _BINARY[type(node.op)](left, right), failed
    if isinstance(node, ast.UnaryOp):
        operand, failed = _interpret(node.operand, values)
        if isinstance(node.op, ast.Not):
            return (np.logical_not(operand) if _is_array(operand) else not operand), failed
        return (-operand if isinstance(node.op, ast.USub) else +operand), failed
    if isinstance(node, ast.BoolOp):
        first, failed = _interpret(node.values[0], values)
        truth = _truth(first)
        for item in node.values[1:]:
            value, item_failed = _interpret(item, values)
            reached = truth if isinstance(node.op, ast.And) else np.logical_not(truth)
            failed = np.logical_or(failed, np.logical_and(reached, item_failed))
            combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            truth = combine(truth, _truth(value))
        return truth, failed
    if isinstance(node, ast.Compare):
        left, failed = _interpret(node.left, values)
        holds: Any = True
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right, right_failed = _interpret(comparator, values)
            failed = np.logical_or(failed, np.logical_and(holds, right_failed))  # a < b < c: c where a < b
            holds = np.logical_and(holds, _COMPARE[type(op)](left, right))
            left = right
        return holds, failed
    if isinstance(node, ast.IfExp):
        (test, test_failed), (body, body_failed), (orelse, orelse_failed) = (
            _interpret(node.test, values), _interpret(node.body, values), _interpret(node.orelse, values)
        )  # fmt: skip
        chosen = _truth(test)
        return _select(chosen, body, orelse), np.logical_or(test_failed, _select(chosen, body_failed, orelse_failed))
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args, failed = [], False
        for arg in node.args:  # Python evaluates every argument
            value, arg_failed = _interpret(arg, values)
            args.append(value)
            failed = np.logical_or(failed, arg_failed)
        func = _FUNCTIONS[node.func.id]
        if func is np.abs:
            return func(*args), failed
        out = args[0]
        for arg in args[1:]:
            out = func(out, arg)
        return out, failed
    raise ConstraintError(f"unsupported expression node {type(node).__name__}")  # unreachable after parse


def _numeric(value: Any) -> bool:
    """Numbers, scalar or array; "O": an array of Python ints too large for int64 (a manifest's
    parameter may list one), compared with 0 element by element like the others."""
    return np.asarray(value).dtype.kind in "biufO"


def _select(chosen: Any, if_true: Any, if_false: Any) -> Any:
    """``if_true`` where ``chosen``, else ``if_false``: element-wise over arrays; for a single config
    the operand itself, so Python ints keep exact arithmetic (numpy made them int64, or refused
    them: "Python int too large")."""
    if any(map(_is_array, (chosen, if_true, if_false))):
        return np.where(chosen, if_true, if_false)
    return if_true if chosen else if_false


def _truth(value: Any) -> Any:
    """Python's truth of a value, element-wise for arrays."""
    return np.asarray(value, dtype=bool) if _is_array(value) else bool(value)


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray)
