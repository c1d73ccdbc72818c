"""ATen scans: cumsum, as a product with a triangular matrix of ones.

tilefuse's op table has no scan. The masks transformers builds (position ids, packed
sequences) take cumulative sums of short rows, which a matmul does exactly for integers below
2^24 (computed in f32; f64 for f64 inputs). Rows longer than _MAX_LENGTH are refused: the
n² product would cost more than the scan it stands for.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._context import Context, Value, check, handles

_MAX_LENGTH = 8192


@handles("aten.cumsum.default")
def cumsum(ctx: Context, x: Value, dim: int, dtype: Optional[Any] = None) -> Value:
    rank = ctx.rank(x)
    result = ctx.result_dtype()
    if rank == 0:
        return ctx.cast(x, result)
    dim = ctx.normalize_dim(dim, rank)
    length = ctx.shape_of(x)[dim]
    check(length <= _MAX_LENGTH, f"cumsum over {length} elements (tilefuse writes it as a {length}² product; "
                                 f"at most {_MAX_LENGTH})")
    exact = result == "f64" or ctx.dtype_of(x) == "f64"
    check(exact or result not in ("i64", "i32") or length < 2**24, "integer cumsum of rows this long")
    wide = "f64" if exact else "f32"
    upper = np.triu(np.ones((length, length), dtype=np.float64 if exact else np.float32))  # upper[j, i] = j <= i
    last = rank - 1
    perm = list(range(rank))
    perm[dim], perm[last] = perm[last], perm[dim]
    moved = ctx.transpose(ctx.cast(x, wide), perm) if dim != last else ctx.cast(x, wide)
    summed = ctx.matmul(moved, ctx.constant(upper))
    if dim != last:
        summed = ctx.transpose(summed, perm)
    return ctx.cast(summed, result)
