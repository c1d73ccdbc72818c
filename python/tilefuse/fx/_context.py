"""What every op handler works with: the graph being built, values, dtypes and the registry.

A handler maps one ATen op overload onto tilefuse's op table through `Context`, whose builder
methods take and return `Value`s (tilefuse node ids); Python numbers, lists and None pass
through unchanged, so a handler sees an FX node's arguments as they were written, with
tensors replaced by Values and symbolic sizes by this call's integers.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .. import _tilefuse
from .._errors import Error

# torch dtype -> tilefuse dtype name.
DTYPES = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
          torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}

HANDLERS: Dict[str, Callable] = {}


def handles(*overloads: str) -> Callable:
    """Registers a handler for ATen overloads named as str(op) prints them ("aten.add.Tensor")."""
    def register(fn: Callable) -> Callable:
        for name in overloads:
            assert name not in HANDLERS, f"two handlers for {name}"
            HANDLERS[name] = fn
        return fn
    return register


class Unsupported(Exception):
    """An op, or a use of it, tilefuse does not take; the message says what and why."""


class Value:
    """A tensor of the graph being built: a tilefuse node id."""
    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id

    def __repr__(self) -> str:
        return f"Value({self.id})"


def _unwrap(arg: Any) -> Any:
    if isinstance(arg, Value):
        return arg.id
    if isinstance(arg, (list, tuple)) and any(isinstance(a, Value) for a in arg):
        return [_unwrap(a) for a in arg]
    return arg


_RETURNS_VALUE = {"parameter", "constant", "scalar", "iota", "pointwise", "cast", "broadcast_to", "reshape",
                  "transpose", "slice", "squeeze", "unsqueeze", "concat", "gather", "gather_elements", "reduce",
                  "matmul", "conv", "pool", "softmax", "log_softmax", "layer_norm", "gelu", "attention_grad"}


class Context:
    """The builder with Values in and out, and the dtype rules handlers share."""

    def __init__(self) -> None:
        self.builder = _tilefuse.GraphBuilder()
        self.node: Optional[torch.fx.Node] = None  # the node being translated
        # Where the graph's inputs come from, in order (translator.Translation.input_positions).
        self.input_positions: List[Tuple[Any, ...]] = []
        # Dynamo's symbolic sizes (dynamic=True, mark_dynamic): each parameter's dims that are
        # one of its symbols ("s0"; "" where static) and the symbols' values in this call. The
        # graph keeps them (Graph::symbolic_inputs), so its kernels take the sizes at launch and
        # another call's sizes reuse them.
        self.symbolic_dims: Dict[str, List[str]] = {}
        self.symbol_values: Dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.builder, name)
        if name == "split":
            return lambda *a, **k: [Value(i) for i in method(*[_unwrap(x) for x in a], **k)]
        if name not in _RETURNS_VALUE:
            return lambda *a, **k: method(*[_unwrap(x) for x in a], **{key: _unwrap(v) for key, v in k.items()})
        return lambda *a, **k: Value(method(*[_unwrap(x) for x in a], **{key: _unwrap(v) for key, v in k.items()}))

    def uniform_input(self, shape: Sequence[int]) -> Value:
        """An f32 input of uniform random numbers in [0, 1), drawn by PyTorch's generator at each
        call (torch.rand on the call's device): a random op's numbers, as torch.manual_seed makes them."""
        self.input_positions.append(("uniform", tuple(shape)))
        return self.parameter(f"uniform_{len(self.input_positions)}", "f32", list(shape))

    # ---- values and dtypes

    def rank(self, x: Value) -> int:
        return len(self.builder.shape(x.id))

    def shape_of(self, x: Value) -> List[int]:
        return list(self.builder.shape(x.id))

    def dtype_of(self, x: Value) -> str:
        return self.builder.dtype(x.id)

    def result_dtype(self) -> str:
        """The dtype PyTorch gives the node's (first) result, from its traced metadata."""
        value = self.node.meta.get("val") if self.node is not None else None
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if not isinstance(value, torch.Tensor):
            raise Unsupported("its result's dtype is not recorded in the graph")
        return torch_dtype(value.dtype)

    def as_tensor(self, x: Any, dtype: str) -> Value:
        """`x` (a Value or a Python number) as a tensor of `dtype`."""
        if isinstance(x, Value):
            return self.cast(x, dtype)
        if isinstance(x, (bool, int, float)):
            return self.scalar(float(x), dtype)
        raise Unsupported(f"an operand of type {type(x).__name__} where a tensor or number is expected")

    def promoted(self, args: Sequence[Any]) -> str:
        """PyTorch's type promotion over tensors and numbers (a number does not widen a
        tensor of its own category: bf16 + 2.0 stays bf16)."""
        tensors = [torch_dtype_of(self.dtype_of(a)) for a in args if isinstance(a, Value)]
        numbers = [a for a in args if not isinstance(a, Value)]
        result = tensors[0] if tensors else torch.float32
        for t in tensors[1:]:
            result = torch.promote_types(result, t)
        for n in numbers:
            if isinstance(n, float) and not result.is_floating_point:
                result = torch.get_default_dtype()
            elif isinstance(n, int) and not isinstance(n, bool) and result == torch.bool:
                result = torch.int64
        return torch_dtype(result)

    def normalize_dim(self, dim: int, rank: int) -> int:
        return dim + max(rank, 1) if dim < 0 else dim


def torch_dtype(dtype: torch.dtype) -> str:
    if dtype not in DTYPES:
        raise Unsupported(f"tilefuse has no {dtype} tensors (it takes {', '.join(str(d) for d in DTYPES)})")
    return DTYPES[dtype]


def opmath(dtype: str) -> str:
    """The dtype PyTorch computes a float op of `dtype` in: f32 for the half types, rounded once
    at the end (a handler that writes an op as several steps computes them in it)."""
    return {"bf16": "f32", "f16": "f32"}.get(dtype, dtype)


def torch_dtype_of(name: str) -> torch.dtype:
    return next(t for t, n in DTYPES.items() if n == name)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Unsupported(message)


__all__ = ["Context", "Error", "HANDLERS", "Unsupported", "Value", "check", "handles", "opmath", "torch_dtype",
           "torch_dtype_of"]
