"""A Cedar policy as z3 formulas over one request environment: when it is satisfied, and
when evaluating it raises an error.

Cedar evaluates ``principal constraint && action constraint && resource constraint &&
when... && !unless...`` left to right, short-circuiting, and a policy whose evaluation
errs is skipped (clearance denies when a *forbid* errs: ``_verdicts``). So each expression
encodes to a value and an error condition, and ``&&``, ``||`` and ``if`` keep Cedar's
order: ``a && b`` errs when ``a`` errs, or ``a`` is true and ``b`` errs.

The subset: literals, ``principal`` / ``action`` / ``resource`` / ``context``, ``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, ``+``, ``-``, ``*`` and negation on longs (an overflow
is an error), ``&&``, ``||``, ``!``, ``if``, ``in`` (an entity or a set of entities),
``is``, ``has`` (nested too), ``like``, attribute access, set literals and ``contains``,
``containsAll``, ``containsAny``, ``isEmpty``. Anything else (extension functions such as
``ip`` or ``decimal``, tags, records compared as wholes, template slots) raises
:class:`~._values.Outside`, which the caller reports with the policy's id and file:line;
the analysis never guesses what an unencoded construct does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import z3
from cedarpy import pst

from clearance.policy.cedar.analysis._values import (
    LONG_MAX,
    LONG_MIN,
    TRUE,
    EntityVal,
    Outside,
    RecordVal,
    Scalar,
    SetVal,
    Value,
    constant,
    present_and,
)

__all__ = ["Env", "encode_policy", "scope_holds"]

_FALSE = z3.BoolVal(False)

_Encoded = tuple[Value, Any]
"""A value and the condition under which computing it errs."""


@dataclass(slots=True)
class Env:
    """One request environment: the request's parts and the constant entities."""

    principal: EntityVal
    action: EntityVal
    resource: EntityVal
    context: RecordVal
    entity: Callable[[str, str], EntityVal]
    """A constant entity by type and id (its ancestors and attributes from the store)."""


def encode_policy(node: pst.Template, env: Env) -> tuple[Any, Any]:
    """(satisfied, errs): z3 Bools saying when ``node`` applies and when it errs.

    Raises:
        Outside: the policy uses a construct outside the encoded subset.
    """
    parts: list[tuple[Any, Any]] = [
        (_scope(node.principal, env.principal, env), _FALSE),
        (_action_scope(node.action, env), _FALSE),
        (_scope(node.resource, env.resource, env), _FALSE),
    ]
    for clause in node.clauses:
        value, err = _bool(_expr(clause.expr, env))
        parts.append((z3.Not(value) if isinstance(clause, pst.Unless) else value, err))
    holds, errs = TRUE, _FALSE
    for value, err in parts:
        # Short-circuit: a part is evaluated only when every part before it held.
        errs = z3.Or(errs, z3.And(holds, err))
        holds = z3.And(holds, value)
    return z3.And(holds, z3.Not(errs)), errs


def scope_holds(node: pst.Template, env: Env) -> bool:
    """Whether ``node``'s scope can match a request of ``env`` (its conditions aside): a
    policy whose scope cannot match is never evaluated, so its conditions are not encoded
    (they may read context attributes this tool does not have)."""
    scope = z3.And(
        _scope(node.principal, env.principal, env),
        _action_scope(node.action, env),
        _scope(node.resource, env.resource, env),
    )
    return not z3.is_false(z3.simplify(scope))


def _uid(entity: pst.EntityOrSlot, env: Env) -> EntityVal:
    if isinstance(entity, pst.Slot):
        raise Outside(f"the template slot ?{entity.name} (templates are not analysed)")
    return env.entity(str(entity.type), entity.id)


def _scope(constraint: pst.PrincipalOrResourceConstraint, var: EntityVal, env: Env) -> Any:
    if isinstance(constraint, pst.ScopeAny):
        return TRUE
    if isinstance(constraint, pst.ScopeEq):
        return _eq(var, _uid(constraint.entity, env))
    if isinstance(constraint, pst.ScopeIn):
        return _in(var, _uid(constraint.entity, env))
    if isinstance(constraint, pst.ScopeIs):
        return z3.BoolVal(var.type == str(constraint.entity_type))
    return z3.And(
        z3.BoolVal(var.type == str(constraint.entity_type)),
        _in(var, _uid(constraint.entity, env)),
    )


def _action_scope(constraint: pst.ActionConstraint, env: Env) -> Any:
    if isinstance(constraint, pst.ScopeAny):
        return TRUE
    if isinstance(constraint, pst.ActionEq):
        return _eq(env.action, _uid(constraint.entity, env))
    return z3.Or(_FALSE, *(_in(env.action, _uid(e, env)) for e in constraint.entities))


def _bool(encoded: _Encoded) -> tuple[Any, Any]:
    value, err = encoded
    if not isinstance(value, Scalar) or value.kind != "Bool":
        raise Outside("a condition that is not a boolean")
    return value.term, err


def _long(encoded: _Encoded) -> tuple[Any, Any]:
    value, err = encoded
    if not isinstance(value, Scalar) or value.kind != "Long":
        raise Outside("an arithmetic or comparison operand that is not a long")
    return value.term, err


def _expr(node: pst.Expr, env: Env) -> _Encoded:
    if isinstance(node, pst.BoolLit | pst.LongLit | pst.StringLit):
        return constant(node.value), _FALSE
    if isinstance(node, pst.EntityLit):
        return _uid(node.value, env), _FALSE
    if isinstance(node, pst.Var):
        if node.name == "context":
            return env.context, _FALSE
        var = {"principal": env.principal, "action": env.action, "resource": env.resource}
        return var[node.name], _FALSE
    if isinstance(node, pst.BinaryOp):
        return _binary(node, env)
    if isinstance(node, pst.UnaryOp):
        return _unary(node, env)
    if isinstance(node, pst.GetAttr):
        base, err = _expr(node.base, env)
        present, value = _attribute(base, node.attr)
        return value, z3.Or(err, z3.Not(present))
    if isinstance(node, pst.HasAttr):
        base, err = _expr(node.base, env)
        holds = TRUE
        for attr in node.attrs:
            try:
                present, base = _attribute(base, attr)
            except _NoAttribute:
                return Scalar("Bool", _FALSE), err
            holds = z3.And(holds, present)
        return Scalar("Bool", holds), err
    if isinstance(node, pst.Like):
        value, err = _expr(node.base, env)
        if not isinstance(value, Scalar) or value.kind != "String":
            raise Outside("`like` on a value that is not a string")
        return Scalar("Bool", z3.InRe(value.term, _pattern(node.pattern))), err
    if isinstance(node, pst.Is):
        value, err = _expr(node.base, env)
        if not isinstance(value, EntityVal):
            raise Outside("`is` on a value that is not an entity")
        holds = z3.BoolVal(value.type == str(node.entity_type))
        if node.in_expr is not None:
            target, target_err = _expr(node.in_expr, env)
            err = z3.Or(err, z3.And(holds, target_err))
            holds = z3.And(holds, _in(value, target))
        return Scalar("Bool", holds), err
    if isinstance(node, pst.IfThenElse):
        cond, cond_err = _bool(_expr(node.cond, env))
        if z3.is_true(cond) or z3.is_false(cond):
            taken, err = _expr(node.then_expr if z3.is_true(cond) else node.else_expr, env)
            return taken, z3.Or(cond_err, err)
        then, then_err = _expr(node.then_expr, env)
        other, other_err = _expr(node.else_expr, env)
        if not (isinstance(then, Scalar) and isinstance(other, Scalar)) or then.kind != other.kind:
            raise Outside("an `if` whose branches are not booleans, longs or strings alike")
        err = z3.Or(cond_err, z3.And(cond, then_err), z3.And(z3.Not(cond), other_err))
        return Scalar(then.kind, z3.If(cond, then.term, other.term)), err
    if isinstance(node, pst.Set):
        items = [_expr(e, env) for e in node.elements]
        kinds = {v.kind if isinstance(v, Scalar) else "Entity" for v, _ in items}
        if any(isinstance(v, SetVal | RecordVal) for v, _ in items) or len(kinds) > 1:
            raise Outside(
                "a set literal whose elements are not all strings, longs, booleans or entities"
            )
        return SetVal(kinds.pop() if kinds else "", tuple((TRUE, v) for v, _ in items)), _any(
            _FALSE, *(e for _, e in items)
        )
    raise Outside(f"the expression {type(node).__name__}")


class _NoAttribute(Outside):
    pass


def _attribute(base: Value, attr: str) -> tuple[Any, Value]:
    record = base.attrs if isinstance(base, EntityVal) else base
    if not isinstance(record, RecordVal):
        if isinstance(base, EntityVal):
            raise _NoAttribute(f"the attribute {attr!r} of an entity without attributes")
        raise Outside(f"the attribute {attr!r} of a value that is not a record or an entity")
    found = record.get(attr)
    if found is None:
        raise _NoAttribute(f"the attribute {attr!r}, which the schema does not declare")
    return found


def _pattern(pattern: tuple[pst.PatternElem, ...]) -> Any:
    any_string = z3.Full(z3.ReSort(z3.StringSort()))
    parts: list[Any] = []
    text = ""
    for element in pattern:
        if isinstance(element, pst.Wildcard):
            if text:
                parts.append(z3.Re(z3.StringVal(text)))
                text = ""
            parts.append(any_string)
        else:
            text += element.value
    if text or not parts:
        parts.append(z3.Re(z3.StringVal(text)))
    return parts[0] if len(parts) == 1 else z3.Concat(*parts)


_COMPARE: Mapping[str, Callable[[Any, Any], Any]] = {
    "less": lambda a, b: a < b,
    "less_eq": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_eq": lambda a, b: a >= b,
}
_ARITHMETIC: Mapping[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
}


def _binary(node: pst.BinaryOp, env: Env) -> _Encoded:
    op = node.op
    if op in ("and", "or"):
        left, left_err = _bool(_expr(node.left, env))
        if z3.is_false(left) if op == "and" else z3.is_true(left):
            # Decided by a left side known in this environment (`principal is User &&
            # principal.level > 3` for an Agent): the right side is not evaluated, and
            # Cedar's validator does not type it either.
            return Scalar("Bool", left), left_err
        right, right_err = _bool(_expr(node.right, env))
        # The right side is evaluated only when the left does not decide.
        reached = left if op == "and" else z3.Not(left)
        err = z3.Or(left_err, z3.And(z3.Not(left_err), reached, right_err))
        return Scalar("Bool", _fold(op, left, right)), err
    left, left_err = _expr(node.left, env)
    right, right_err = _expr(node.right, env)
    err = z3.Or(left_err, right_err)
    if op in ("eq", "not_eq"):
        same = _eq(left, right)
        return Scalar("Bool", same if op == "eq" else z3.Not(same)), err
    if op in _COMPARE:
        return Scalar("Bool", _COMPARE[op](_long((left, err))[0], _long((right, err))[0])), err
    if op in _ARITHMETIC:
        result = _ARITHMETIC[op](_long((left, err))[0], _long((right, err))[0])
        overflow = z3.Or(result < LONG_MIN, result > LONG_MAX)
        return Scalar("Long", result), z3.Or(err, overflow)
    if op == "in":
        if not isinstance(left, EntityVal):
            raise Outside("`in` whose left side is not an entity")
        return Scalar("Bool", _in(left, right)), err
    if op in ("contains", "contains_all", "contains_any"):
        if not isinstance(left, SetVal):
            raise Outside(f"`{op}` on a value that is not a set")
        if op == "contains":
            return Scalar("Bool", _member(right, left)), err
        if not isinstance(right, SetVal):
            raise Outside(f"`{op}` with an argument that is not a set")
        if op == "contains_all":
            return Scalar("Bool", _subset(right, left)), err
        return Scalar(
            "Bool", _any(*(present_and(p, _member(v, left)) for p, v in right.slots))
        ), err
    raise Outside(f"the operator {op}")


def _unary(node: pst.UnaryOp, env: Env) -> _Encoded:
    value, err = _expr(node.arg, env)
    if node.op == "not":
        term, err = _bool((value, err))
        folded = _FALSE if z3.is_true(term) else TRUE if z3.is_false(term) else z3.Not(term)
        return Scalar("Bool", folded), err
    if node.op == "neg":
        term, err = _long((value, err))
        return Scalar("Long", -term), z3.Or(err, term == LONG_MIN)
    if node.op == "is_empty":
        if not isinstance(value, SetVal):
            raise Outside("`isEmpty` on a value that is not a set")
        return Scalar("Bool", z3.Not(z3.Or(_FALSE, *(p for p, _ in value.slots)))), err
    raise Outside(f"the function {node.op} (extension types are not analysed)")


def _any(*terms: Any) -> Any:
    """The disjunction of ``terms`` (false when there is none)."""
    return _FALSE if not terms else terms[0] if len(terms) == 1 else z3.Or(*terms)


def _member(item: Value, whole: SetVal) -> Any:
    return _any(*(present_and(p, _eq(v, item)) for p, v in whole.slots))


def _subset(part: SetVal, whole: SetVal) -> Any:
    terms = [
        _member(v, whole) if p is TRUE else z3.Implies(p, _member(v, whole)) for p, v in part.slots
    ]
    return TRUE if not terms else terms[0] if len(terms) == 1 else z3.And(*terms)


def _fold(op: str, left: Any, right: Any) -> Any:
    """``left && right`` or ``left || right``, folded when a side is a constant: a value
    known in the environment (``context.facts has command`` for a tool without that fact)
    must stay a constant through the conjunctions above it, for the short-circuit of
    :func:`_binary` to see it, as Cedar's validator does."""
    decides, neutral = (z3.is_false, z3.is_true) if op == "and" else (z3.is_true, z3.is_false)
    if decides(left) or neutral(right):
        return left
    if decides(right) or neutral(left):
        return right
    return z3.And(left, right) if op == "and" else z3.Or(left, right)


def _constant(term: Any) -> Any:
    """``term``'s Python value when it is a literal, else None."""
    if z3.is_true(term) or z3.is_false(term):
        return z3.is_true(term)
    if z3.is_int_value(term):
        return term.as_long()
    if z3.is_string_value(term):
        return term.as_string()
    return None


def _eq(left: Value, right: Value) -> Any:
    if isinstance(left, Scalar) and isinstance(right, Scalar):
        if left.kind != right.kind:
            return _FALSE
        a, b = _constant(left.term), _constant(right.term)
        if a is not None and b is not None:
            return z3.BoolVal(a == b)
        return left.term == right.term
    if isinstance(left, EntityVal) and isinstance(right, EntityVal):
        if left.type != right.type:
            return _FALSE
        if left.constant and right.constant:
            return z3.BoolVal(left.id == right.id)
        a = z3.StringVal(left.id) if left.constant else left.id
        b = z3.StringVal(right.id) if right.constant else right.id
        return a == b
    if isinstance(left, SetVal) and isinstance(right, SetVal):
        return z3.And(_subset(left, right), _subset(right, left))
    if isinstance(left, RecordVal) or isinstance(right, RecordVal):
        raise Outside("`==` between records")
    return _FALSE  # values of different kinds are never equal


def _in(entity: EntityVal, target: Value) -> Any:
    if isinstance(target, SetVal):
        return _any(*(present_and(p, _in(entity, v)) for p, v in target.slots))
    if not isinstance(target, EntityVal):
        raise Outside("`in` whose right side is not an entity or a set of entities")
    if target.constant:
        if entity.constant:
            key = (target.type, target.id)
            return z3.BoolVal(key in entity.ancestors or key == (entity.type, entity.id))
        assert entity.member_of is not None
        return entity.member_of(target.type, target.id)
    if not entity.constant:
        return TRUE  # the principal is in itself
    # A constant entity in the principal: the principal is it or one of its ancestors.
    keys = [(entity.type, entity.id), *entity.ancestors]
    return z3.Or(_FALSE, *(target.id == z3.StringVal(i) for t, i in keys if t == target.type))
