"""Element-wise ATen ops: arithmetic, comparisons, logic and activations.

Operands are promoted as PyTorch promotes them (Context.promoted) and the op is computed in
the result's dtype; comparisons compare in the promoted dtype and give bool.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from ._context import Context, Unsupported, Value, check, handles, opmath

# ATen op -> tilefuse op of the same meaning (ops.def).
_UNARY = {"neg": "neg", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "reciprocal": "reciprocal", "tanh": "tanh", "sigmoid": "sigmoid", "erf": "erf", "sin": "sin", "cos": "cos",
          "asin": "asin", "acos": "acos", "atan": "atan",
          "relu": "relu", "floor": "floor", "ceil": "ceil"}
_BINARY = {"mul": "mul", "div": "div", "maximum": "max", "minimum": "min", "remainder": "mod", "fmod": "fmod",
           "pow": "pow", "atan2": "atan2"}
_COMPARE = {"eq": "equal", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}
_LOGIC = {"logical_and": "and", "logical_or": "or", "logical_xor": "xor"}


def _unary(op: str):
    def handler(ctx: Context, x: Value) -> Value:
        dtype = ctx.result_dtype()
        return ctx.pointwise(op, [ctx.as_tensor(x, dtype)])
    return handler


for _name, _op in _UNARY.items():
    handles(f"aten.{_name}.default")(_unary(_op))


def _binary(op: str):
    def handler(ctx: Context, a: Any, b: Any) -> Value:
        dtype = ctx.result_dtype()
        return ctx.pointwise(op, [ctx.as_tensor(a, dtype), ctx.as_tensor(b, dtype)])
    return handler


def _scaling(op: str):
    """mul and div: PyTorch keeps a Python-number factor of a half tensor in f32 (x_bf16 * 0.1
    multiplies by 0.1f, not by bf16's 0.10009765625); other ops round it to the dtype."""
    def handler(ctx: Context, a: Any, b: Any) -> Value:
        dtype = ctx.result_dtype()
        compute = opmath(dtype) if not isinstance(b, Value) else dtype
        return ctx.cast(ctx.pointwise(op, [ctx.as_tensor(a, compute), ctx.as_tensor(b, compute)]), dtype)
    return handler


for _name, _op in _BINARY.items():
    if _op is None:
        continue
    overloads = ["Tensor", "Scalar"] if _name in ("mul", "div", "remainder", "fmod") else ["default"]
    if _name == "pow":
        overloads = ["Tensor_Tensor", "Tensor_Scalar", "Scalar"]
    for _overload in overloads:
        handles(f"aten.{_name}.{_overload}")((_scaling if _name in ("mul", "div") else _binary)(_op))


def _with_alpha(op: str):
    """add and sub: a op alpha * b."""
    def handler(ctx: Context, a: Any, b: Any, alpha: Any = 1) -> Value:
        dtype = ctx.result_dtype()
        b = ctx.as_tensor(b, dtype)
        if alpha != 1:
            b = ctx.pointwise("mul", [b, ctx.scalar(float(alpha), dtype)])
        return ctx.pointwise(op, [ctx.as_tensor(a, dtype), b])
    return handler


add = handles("aten.add.Tensor", "aten.add.Scalar")(_with_alpha("add"))
sub = handles("aten.sub.Tensor", "aten.sub.Scalar")(_with_alpha("sub"))


@handles("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(ctx: Context, a: Any, b: Any, alpha: Any = 1) -> Value:
    return sub(ctx, b, a, alpha)  # b - alpha * a


@handles("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(ctx: Context, a: Any, b: Any, rounding_mode: Optional[str] = None) -> Value:
    dtype = ctx.result_dtype()
    if rounding_mode is None:
        return ctx.pointwise("div", [ctx.as_tensor(a, dtype), ctx.as_tensor(b, dtype)])
    integer = dtype not in ("f64", "f32", "f16", "bf16")
    wide = "f64" if dtype in ("f64", "i64", "i32") else "f32"
    by_tensor = isinstance(b, Value)
    a, b = ctx.as_tensor(a, wide), ctx.as_tensor(b, wide)  # a number divisor stays f32 for the half types
    if rounding_mode == "floor":
        q = ctx.pointwise("floor", [ctx.pointwise("div", [a, b])]) if integer else _floor_divide(ctx, a, b, wide)
    elif rounding_mode == "trunc":  # toward zero: floor of |q|, signed
        q = ctx.pointwise("div", [a, b])
        if not integer and by_tensor:  # PyTorch truncates the quotient rounded to the dtype then (f16: 3 / 0.3 is 10)
            q = ctx.cast(q, dtype)
        zero = ctx.scalar(0.0, ctx.dtype_of(q))
        negative = ctx.pointwise("less", [q, zero])
        q = ctx.pointwise("where", [negative, ctx.pointwise("ceil", [q]), ctx.pointwise("floor", [q])])
    else:
        raise Unsupported(f"rounding_mode {rounding_mode!r}")
    return ctx.cast(q, dtype)


def _floor_divide(ctx: Context, a: Value, b: Value, dtype: str) -> Value:
    """PyTorch's floor division of floats (div_floor_floating), from fmod: floor(a / b) is wrong
    where the quotient rounds up to an integer (1 // 0.1 is 9: 0.1f is a little over 0.1)."""
    zero, one = ctx.scalar(0.0, dtype), ctx.scalar(1.0, dtype)
    mod = ctx.pointwise("fmod", [a, b])
    div = ctx.pointwise("div", [ctx.pointwise("sub", [a, mod]), b])
    # (a - mod) / b is the quotient truncated; a nonzero remainder of the other sign than b puts it one above the floor.
    signs_differ = ctx.pointwise("xor", [ctx.pointwise("less", [b, zero]), ctx.pointwise("less", [mod, zero])])
    off = ctx.pointwise("and", [ctx.pointwise("not", [ctx.pointwise("equal", [mod, zero])]), signs_differ])
    div = ctx.pointwise("where", [off, ctx.pointwise("sub", [div, one]), div])
    floored = ctx.pointwise("floor", [div])
    up = ctx.pointwise("greater", [ctx.pointwise("sub", [div, floored]), ctx.scalar(0.5, dtype)])
    floored = ctx.pointwise("where", [up, ctx.pointwise("add", [floored, one]), floored])
    quotient = ctx.pointwise("div", [a, b])
    # A zero quotient takes a / b's sign; a zero divisor gives a / b (inf or nan).
    signed_zero = ctx.pointwise("mul", [zero, quotient])
    floored = ctx.pointwise("where", [ctx.pointwise("equal", [div, zero]), signed_zero, floored])
    return ctx.pointwise("where", [ctx.pointwise("equal", [b, zero]), quotient, floored])


def _compare(op: str, negate: bool = False):
    def handler(ctx: Context, a: Any, b: Any) -> Value:
        dtype = ctx.promoted([a, b])
        result = ctx.pointwise(op, [ctx.as_tensor(a, dtype), ctx.as_tensor(b, dtype)])
        return ctx.pointwise("not", [result]) if negate else result
    return handler


for _name, _op in _COMPARE.items():
    for _overload in ("Tensor", "Scalar"):
        handles(f"aten.{_name}.{_overload}")(_compare(_op))
for _overload in ("Tensor", "Scalar"):
    handles(f"aten.ne.{_overload}")(_compare("equal", negate=True))


def _logic(op: str):
    def handler(ctx: Context, a: Any, b: Any) -> Value:
        return ctx.pointwise(op, [ctx.as_tensor(a, "bool"), ctx.as_tensor(b, "bool")])
    return handler


for _name, _op in _LOGIC.items():
    handles(f"aten.{_name}.default")(_logic(_op))


@handles("aten.logical_not.default")
def logical_not(ctx: Context, x: Value) -> Value:
    return ctx.pointwise("not", [ctx.as_tensor(x, "bool")])


@handles("aten.bitwise_not.default")
def bitwise_not(ctx: Context, x: Value) -> Value:
    check(ctx.dtype_of(x) == "bool", "bitwise_not of integers (only of bool)")
    return ctx.pointwise("not", [x])


@handles("aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor")
def bitwise_logic(ctx: Context, a: Any, b: Any) -> Value:
    check(ctx.result_dtype() == "bool", "bitwise ops on integers (only on bool)")
    op = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor"}[ctx.node.target.__name__.split(".")[0]]
    return ctx.pointwise(op, [ctx.as_tensor(a, "bool"), ctx.as_tensor(b, "bool")])


@handles("aten.isnan.default")
def isnan(ctx: Context, x: Value) -> Value:
    return ctx.pointwise("isnan", [x])


@handles("aten.isinf.default")
def isinf(ctx: Context, x: Value) -> Value:
    return ctx.pointwise("isinf", [x])


@handles("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def where(ctx: Context, condition: Value, a: Any, b: Any) -> Value:
    dtype = ctx.result_dtype()
    return ctx.pointwise("where", [ctx.as_tensor(condition, "bool"), ctx.as_tensor(a, dtype), ctx.as_tensor(b, dtype)])


@handles("aten.clamp.default", "aten.clamp.Tensor")
def clamp(ctx: Context, x: Value, min: Any = None, max: Any = None) -> Value:
    dtype = ctx.result_dtype()
    x = ctx.as_tensor(x, dtype)
    if min is not None:
        x = ctx.pointwise("max", [x, ctx.as_tensor(min, dtype)])
    if max is not None:
        x = ctx.pointwise("min", [x, ctx.as_tensor(max, dtype)])
    return x


@handles("aten.clamp_min.default", "aten.clamp_min.Tensor")
def clamp_min(ctx: Context, x: Value, min: Any) -> Value:
    return clamp(ctx, x, min=min)


@handles("aten.clamp_max.default", "aten.clamp_max.Tensor")
def clamp_max(ctx: Context, x: Value, max: Any) -> Value:
    return clamp(ctx, x, max=max)


@handles("aten.hardtanh.default")
def hardtanh(ctx: Context, x: Value, min_val: float = -1.0, max_val: float = 1.0) -> Value:
    return clamp(ctx, x, min=min_val, max=max_val)


@handles("aten.sign.default")
def sign(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    zero, one = ctx.scalar(0.0, dtype), ctx.scalar(1.0, dtype)
    positive = ctx.pointwise("where", [ctx.pointwise("greater", [x, zero]), one, zero])
    negative = ctx.pointwise("where", [ctx.pointwise("less", [x, zero]), one, zero])
    return ctx.pointwise("sub", [positive, negative])


@handles("aten.silu.default")
def silu(ctx: Context, x: Value) -> Value:
    return ctx.pointwise("mul", [x, ctx.pointwise("sigmoid", [x])])


@handles("aten.gelu.default")
def gelu(ctx: Context, x: Value, approximate: str = "none") -> Value:
    check(approximate in ("none", "tanh"), f"gelu approximate={approximate!r}")
    return ctx.gelu(x, approximate == "tanh")


@handles("aten.leaky_relu.default")
def leaky_relu(ctx: Context, x: Value, negative_slope: float = 0.01) -> Value:
    dtype = ctx.result_dtype()
    zero = ctx.scalar(0.0, dtype)
    scaled = ctx.pointwise("mul", [x, ctx.scalar(float(negative_slope), dtype)])
    return ctx.pointwise("where", [ctx.pointwise("greater", [x, zero]), x, scaled])


@handles("aten.elu.default")
def elu(ctx: Context, x: Value, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    x = ctx.cast(x, wide)
    inner = ctx.pointwise("mul", [x, ctx.scalar(float(input_scale), wide)])
    negative = ctx.pointwise("mul", [expm1_of(ctx, inner, wide), ctx.scalar(float(alpha), wide)])
    chosen = ctx.pointwise("where", [ctx.pointwise("greater", [x, ctx.scalar(0.0, wide)]), x, negative])
    return ctx.cast(ctx.pointwise("mul", [chosen, ctx.scalar(float(scale), wide)]) if scale != 1.0 else chosen, dtype)


@handles("aten.hardsigmoid.default")
def hardsigmoid(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    shifted = ctx.pointwise("add", [ctx.pointwise("div", [x, ctx.scalar(6.0, dtype)]), ctx.scalar(0.5, dtype)])
    return clamp(ctx, shifted, 0.0, 1.0)


@handles("aten.hardswish.default")
def hardswish(ctx: Context, x: Value) -> Value:
    return ctx.pointwise("mul", [x, hardsigmoid(ctx, x)])


@handles("aten.log1p.default")
def log1p(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    return ctx.cast(log1p_of(ctx, ctx.as_tensor(x, wide), wide), dtype)


@handles("aten.expm1.default")
def expm1(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    return ctx.cast(expm1_of(ctx, ctx.as_tensor(x, wide), wide), dtype)


@handles("aten.exp2.default")
def exp2(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    scaled = ctx.pointwise("mul", [ctx.as_tensor(x, wide), ctx.scalar(math.log(2.0), wide)])
    return ctx.cast(ctx.pointwise("exp", [scaled]), dtype)


@handles("aten.log2.default")
def log2(ctx: Context, x: Value) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    return ctx.cast(ctx.pointwise("mul", [ctx.pointwise("log", [ctx.as_tensor(x, wide)]),
                                          ctx.scalar(1 / math.log(2.0), wide)]), dtype)


@handles("aten.softplus.default")
def softplus(ctx: Context, x: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)
    x = ctx.cast(x, wide)
    scaled = ctx.pointwise("mul", [x, ctx.scalar(float(beta), wide)])
    soft = ctx.pointwise("div", [log1p_of(ctx, ctx.pointwise("exp", [scaled]), wide), ctx.scalar(float(beta), wide)])
    above = ctx.pointwise("greater", [scaled, ctx.scalar(float(threshold), wide)])
    return ctx.cast(ctx.pointwise("where", [above, x, soft]), dtype)


def expm1_of(ctx: Context, x: Value, dtype: str) -> Value:
    """exp(x) - 1 with x's digits kept when |x| << 1 (Kahan): (u - 1) · x / log(u) for u = exp(x),
    whose rounding errors cancel; x itself where u rounds to 1."""
    one = ctx.scalar(1.0, dtype)
    u = ctx.pointwise("exp", [x])
    u_minus_one = ctx.pointwise("sub", [u, one])
    scaled = ctx.pointwise("div", [ctx.pointwise("mul", [u_minus_one, x]), ctx.pointwise("log", [u])])
    # u infinite (inf / inf) or 0 (u - 1 is -1 exactly): u - 1 is the answer.
    edge = ctx.pointwise("or", [ctx.pointwise("isinf", [u]),
                                ctx.pointwise("equal", [u_minus_one, ctx.scalar(-1.0, dtype)])])
    result = ctx.pointwise("where", [edge, u_minus_one, scaled])
    return ctx.pointwise("where", [ctx.pointwise("equal", [u, one]), x, result])


def log1p_of(ctx: Context, x: Value, dtype: str) -> Value:
    """log(1 + x) with x's digits kept when |x| << 1 (where 1 + x rounds them off): log(u) · x / (u - 1)
    for u = 1 + x, whose rounding cancels (Goldberg); x itself where u rounds to 1."""
    one = ctx.scalar(1.0, dtype)
    u = ctx.pointwise("add", [x, one])
    u_minus_one = ctx.pointwise("sub", [u, one])
    ratio = ctx.pointwise("div", [x, u_minus_one])
    ratio = ctx.pointwise("where", [ctx.pointwise("isinf", [u]), one, ratio])  # x infinite: inf / inf
    result = ctx.pointwise("mul", [ctx.pointwise("log", [u]), ratio])
    return ctx.pointwise("where", [ctx.pointwise("equal", [u_minus_one, ctx.scalar(0.0, dtype)]), x, result])


# ---- copies and casts: in a functional graph these are values, not memory

@handles("aten._to_copy.default")
def to_copy(ctx: Context, x: Value, dtype: Any = None, **ignored: Any) -> Value:
    return ctx.cast(x, ctx.result_dtype())


@handles("aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default", "aten.detach.default",
         "aten.contiguous.default", "aten.alias_copy.default", "aten.detach_copy.default")
def identity(ctx: Context, x: Value, **ignored: Any) -> Value:
    return x


@handles("aten.copy.default")
def copy(ctx: Context, destination: Value, source: Value, non_blocking: bool = False) -> Value:
    return ctx.broadcast_to(ctx.cast(source, ctx.dtype_of(destination)), ctx.shape_of(destination))
