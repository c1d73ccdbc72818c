"""ATen view, layout and indexing ops: reshapes, permutations, slices, concatenation,
gathers and padding. In tilefuse these are index arithmetic in the consumer, not copies."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import torch

from ._context import Context, Unsupported, Value, check, handles

_INT64_MAX = 2**63 - 1


def _concrete_shape(ctx: Context, x: Value, shape: Sequence[int]) -> List[int]:
    """A view's size list with -1 resolved."""
    shape = [int(d) for d in shape]
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        total = 1
        for d in ctx.shape_of(x):
            total *= d
        shape[shape.index(-1)] = total // known if known else 0
    return shape


@handles("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.view_copy.default")
def view(ctx: Context, x: Value, shape: Sequence[int]) -> Value:
    return ctx.reshape(x, _concrete_shape(ctx, x, shape))


@handles("aten.permute.default", "aten.permute_copy.default")
def permute(ctx: Context, x: Value, dims: Sequence[int]) -> Value:
    rank = ctx.rank(x)
    return ctx.transpose(x, [ctx.normalize_dim(d, rank) for d in dims])


@handles("aten.t.default")
def t(ctx: Context, x: Value) -> Value:
    return ctx.transpose(x, [1, 0]) if ctx.rank(x) == 2 else x


@handles("aten.transpose.int")
def transpose(ctx: Context, x: Value, dim0: int, dim1: int) -> Value:
    rank = ctx.rank(x)
    perm = list(range(rank))
    a, b = ctx.normalize_dim(dim0, rank), ctx.normalize_dim(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.transpose(x, perm)


@handles("aten.expand.default", "aten.expand_copy.default")
def expand(ctx: Context, x: Value, shape: Sequence[int], implicit: bool = False) -> Value:
    current = ctx.shape_of(x)
    shape = [int(d) for d in shape]
    offset = len(shape) - len(current)
    target = [current[i - offset] if d == -1 else d for i, d in enumerate(shape)]
    return ctx.broadcast_to(x, target)


@handles("aten.unsqueeze.default", "aten.unsqueeze_copy.default")
def unsqueeze(ctx: Context, x: Value, dim: int) -> Value:
    return ctx.unsqueeze(x, [ctx.normalize_dim(dim, ctx.rank(x) + 1)])


@handles("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.squeeze_copy.dim",
         "aten.squeeze_copy.dims")
def squeeze(ctx: Context, x: Value, dims: Any = None) -> Value:
    shape = ctx.shape_of(x)
    if dims is None:
        dims = [i for i, d in enumerate(shape) if d == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = [ctx.normalize_dim(d, len(shape)) for d in dims]
    dims = [d for d in dims if len(shape) > 0 and shape[d] == 1]  # PyTorch leaves other dims alone
    return ctx.squeeze(x, dims) if dims else x


def _storage_order(size: Sequence[int], stride: Sequence[int]) -> Optional[List[int]]:
    """The dims of a dense layout (no gaps, no overlaps) from outermost to innermost, its size-1
    dims last (any stride serves them); None where the layout is not dense."""
    dims = sorted((d for d, n in enumerate(size) if n != 1), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(dims):
        if stride[d] != expected:
            return None
        expected *= size[d]
    return dims + [d for d, n in enumerate(size) if n == 1]


@handles("aten.as_strided.default", "aten.as_strided_copy.default")
def as_strided(ctx: Context, x: Value, size: Sequence[int], stride: Sequence[int], storage_offset: Optional[int] = None) -> Value:
    # Functionalization writes some views as as_strided over the source's storage: a channels-last
    # network's pooled [N, C, 1, 1] restrided before its flatten (torchvision's ResNets under
    # memory_format=torch.channels_last). The source's layout is its traced one (the node's
    # FakeTensor), whatever layout tilefuse gives the value: where both layouts are dense, the
    # view is the source's elements in storage order, a contiguous run of them, read in the
    # view's storage order (a permute, a reshape, a slice). A gather (gaps, overlaps) is not.
    source = ctx.node.args[0].meta.get("val") if isinstance(ctx.node.args[0], torch.fx.Node) else None
    check(isinstance(source, torch.Tensor), "as_strided of a value whose traced layout is not recorded")
    check(all(isinstance(v, int) for v in [*size, *stride, *source.shape, *source.stride()]),
          "as_strided with symbolic sizes or strides")
    size, stride = [int(n) for n in size], [int(s) for s in stride]
    start = (source.storage_offset() if storage_offset is None else int(storage_offset)) - source.storage_offset()
    source_order = _storage_order(list(source.shape), list(source.stride()))
    view_order = _storage_order(size, stride)
    check(source_order is not None and view_order is not None,
          f"as_strided of size {size} and stride {stride} over a layout of stride {list(source.stride())}: not a "
          "dense run of its source's storage (a gather)")
    count = 1
    for n in size:
        count *= n
    check(0 <= start and start + count <= source.numel(), "as_strided outside its source's elements")
    if source_order != list(range(len(source_order))):
        x = ctx.transpose(x, source_order)
    x = ctx.reshape(x, [source.numel()])
    if count != source.numel():
        x = ctx.slice(x, [start], [start + count], [0], [1])
    x = ctx.reshape(x, [size[d] for d in view_order])
    if view_order != list(range(len(view_order))):
        x = ctx.transpose(x, [view_order.index(d) for d in range(len(view_order))])
    return x


@handles("aten.slice.Tensor", "aten.slice_copy.Tensor")
def slice_(ctx: Context, x: Value, dim: int = 0, start: Optional[int] = None, end: Optional[int] = None,
           step: int = 1) -> Value:
    rank = ctx.rank(x)
    dim = ctx.normalize_dim(dim, rank)
    size = ctx.shape_of(x)[dim]
    start = 0 if start is None else start
    end = size if end is None or end >= _INT64_MAX else end
    if start == 0 and end >= size and step == 1:
        return x
    return ctx.slice(x, [start], [min(end, size) if end >= 0 else end], [dim], [step])


@handles("aten.select.int", "aten.select_copy.int")
def select(ctx: Context, x: Value, dim: int, index: int) -> Value:
    dim = ctx.normalize_dim(dim, ctx.rank(x))
    size = ctx.shape_of(x)[dim]
    index = index + size if index < 0 else index
    return ctx.squeeze(ctx.slice(x, [index], [index + 1], [dim], [1]), [dim])


@handles("aten.split.Tensor", "aten.split_copy.Tensor")
def split(ctx: Context, x: Value, split_size: int, dim: int = 0) -> List[Value]:
    dim = ctx.normalize_dim(dim, ctx.rank(x))
    size = ctx.shape_of(x)[dim]
    sizes = [min(split_size, size - start) for start in range(0, size, split_size)] if split_size > 0 else [size]
    return ctx.split(x, dim, sizes)


@handles("aten.split_with_sizes.default", "aten.split_with_sizes_copy.default")
def split_with_sizes(ctx: Context, x: Value, sizes: Sequence[int], dim: int = 0) -> List[Value]:
    return ctx.split(x, ctx.normalize_dim(dim, ctx.rank(x)), [int(s) for s in sizes])


@handles("aten.unbind.int", "aten.unbind_copy.int")
def unbind(ctx: Context, x: Value, dim: int = 0) -> List[Value]:
    dim = ctx.normalize_dim(dim, ctx.rank(x))
    parts = ctx.split(x, dim, [1] * ctx.shape_of(x)[dim])
    return [ctx.squeeze(p, [dim]) for p in parts]


@handles("aten.cat.default")
def cat(ctx: Context, tensors: Sequence[Value], dim: int = 0) -> Value:
    dtype = ctx.result_dtype()
    tensors = [ctx.cast(t, dtype) for t in tensors if ctx.shape_of(t) != [0]]  # PyTorch skips empty 1-D operands
    check(len(tensors) > 0, "cat of empty tensors only")
    if len(tensors) == 1:
        return tensors[0]
    return ctx.concat(tensors, ctx.normalize_dim(dim, ctx.rank(tensors[0])))


@handles("aten.stack.default")
def stack(ctx: Context, tensors: Sequence[Value], dim: int = 0) -> Value:
    dim = ctx.normalize_dim(dim, ctx.rank(tensors[0]) + 1)
    dtype = ctx.result_dtype()
    parts = [ctx.unsqueeze(ctx.cast(t, dtype), [dim]) for t in tensors]
    return parts[0] if len(parts) == 1 else ctx.concat(parts, dim)


@handles("aten.repeat.default")
def repeat(ctx: Context, x: Value, repeats: Sequence[int]) -> Value:
    shape = ctx.shape_of(x)
    shape = [1] * (len(repeats) - len(shape)) + shape
    x = ctx.reshape(x, shape)
    # [d0, d1] repeated [r0, r1]: [r0, d0, r1, d1] by broadcast, then merged.
    interleaved = []
    for d in shape:
        interleaved += [1, d]
    expanded_shape = []
    for r, d in zip(repeats, shape):
        expanded_shape += [r, d]
    expanded = ctx.broadcast_to(ctx.reshape(x, interleaved), expanded_shape)
    return ctx.reshape(expanded, [r * d for r, d in zip(repeats, shape)])


@handles("aten.embedding.default")
def embedding(ctx: Context, weight: Value, indices: Value, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Value:
    return ctx.gather(weight, indices, 0)


@handles("aten.index_select.default")
def index_select(ctx: Context, x: Value, dim: int, index: Value) -> Value:
    if ctx.rank(index) == 0:  # a 0-d index keeps the dim (size 1), where a gather would drop it
        index = ctx.reshape(index, [1])
    return ctx.gather(x, index, ctx.normalize_dim(dim, ctx.rank(x)))


@handles("aten.gather.default")
def gather(ctx: Context, x: Value, dim: int, index: Value, sparse_grad: bool = False) -> Value:
    return ctx.gather_elements(x, index, ctx.normalize_dim(dim, ctx.rank(x)))


@handles("aten.scatter.value", "aten.scatter.src")
def scatter(ctx: Context, x: Value, dim: int, index: Value, src: Any) -> Value:
    """x with src (a number, or a tensor's elements at the index's positions) written where the
    index points along dim: one index per line along dim (a cross-entropy backward's one-hot of
    its targets), so a comparison with the position, not a scatter."""
    shape = ctx.shape_of(x)
    dim = ctx.normalize_dim(dim, len(shape))
    hit = ctx.pointwise("equal", [ctx.iota(shape, dim, "i64"), ctx.broadcast_to(ctx.cast(index, "i64"), shape)])
    if isinstance(src, Value):
        src = ctx.broadcast_to(ctx.slice(src, [0] * len(shape), ctx.shape_of(index), list(range(len(shape))), [1] * len(shape)), shape)
    return ctx.pointwise("where", [hit, ctx.as_tensor(src, ctx.dtype_of(x)), x])


def _one_index_per_line(node) -> bool:
    """Whether a scatter's index holds one entry along dim and covers the other dims whole (as
    traced): else it is split out to PyTorch."""
    x, dim, index = (a.meta.get("val") if hasattr(a, "meta") else a for a in node.args[:3])
    if not all(isinstance(t, torch.Tensor) for t in (x, index)) or x.dim() != index.dim() or x.dim() == 0:
        return False
    dim = dim % x.dim()
    return index.shape[dim] == 1 and all(index.shape[d] == x.shape[d] for d in range(x.dim()) if d != dim)


scatter.why_not = lambda node: None if _one_index_per_line(node) else "an index other than one entry a line"


@handles("aten.index.Tensor")
def index(ctx: Context, x: Value, indices: Sequence[Optional[Value]]) -> Value:
    """x[i, j] with integer index tensors on consecutive dims (the others taken whole): the
    indexed dims are merged into one and read by one gather at the index i * size_j + j, the
    index tensors broadcast together (transformers builds its masks this way)."""
    used = [d for d, i in enumerate(indices) if i is not None]
    check(used == list(range(used[0], used[-1] + 1)), "advanced indexing on dims that are not next to each other")
    for d in used:
        check(ctx.dtype_of(indices[d]) in ("i64", "i32"), "indexing with a bool mask (its result's size depends on the data)")
    shape = ctx.shape_of(x)
    first, last = used[0], used[-1]
    linear = None
    for d in used:  # negative indices count from the end, as in PyTorch
        i = ctx.cast(indices[d], "i64")
        i = ctx.pointwise("where", [ctx.pointwise("less", [i, ctx.scalar(0.0, "i64")]),
                                    ctx.pointwise("add", [i, ctx.scalar(float(shape[d]), "i64")]), i])
        linear = i if linear is None else ctx.pointwise("add", [ctx.pointwise("mul", [linear, ctx.scalar(float(shape[d]), "i64")]), i])
    merged = x
    if last > first:
        size = 1
        for d in used:
            size *= shape[d]
        merged = ctx.reshape(x, shape[:first] + [size] + shape[last + 1:])
    return ctx.gather(merged, linear, first)


@handles("aten.index_put.default")
def index_put(ctx: Context, x: Value, indices: Sequence[Optional[Value]], values: Value, accumulate: bool = False) -> Value:
    """x with values written at the positions one index tensor gives along one dim (the others
    taken whole): a static KV cache's update, `cache.index_copy_(2, position, k)`, functionalized.
    Each position along the dim finds the first index entry that names it (a comparison with
    every entry and a min over them); hit positions read values there, the others keep x."""
    used = [d for d, i in enumerate(indices) if i is not None]
    dim, index = used[0], indices[used[0]]
    shape = ctx.shape_of(x)
    size, count = shape[dim], ctx.shape_of(index)[0]
    index = ctx.cast(index, "i64")
    index = ctx.pointwise("where", [ctx.pointwise("less", [index, ctx.scalar(0.0, "i64")]),
                                    ctx.pointwise("add", [index, ctx.scalar(float(size), "i64")]), index])
    values = ctx.cast(values, ctx.dtype_of(x))
    # values as x's rank, `count` long along dim (PyTorch broadcasts them to x[index]'s shape).
    slot_shape = list(shape)
    slot_shape[dim] = count
    values = ctx.broadcast_to(ctx.reshape(values, [1] * (len(shape) - ctx.rank(values)) + ctx.shape_of(values)), slot_shape)
    line = [1] * len(shape)
    line[dim] = size
    if count == 1:  # a decode step's one position: a comparison, no search
        # Compared at x's shape (an iota and a broadcast index, both free in a kernel's loads),
        # not along the dim and broadcast: the comparison then lives in the update's own kernel,
        # and a layer's keys and values, sharing it, are updated by one kernel (GPT-2's step:
        # a 256-element comparison kernel a layer and the two updates launched after it).
        hit = ctx.pointwise("equal", [ctx.iota(shape, dim, "i64"), ctx.broadcast_to(ctx.reshape(index, [1] * len(shape)), shape)])
        return ctx.pointwise("where", [hit, ctx.broadcast_to(values, shape), x])
    names = ctx.pointwise("equal", [ctx.iota([size, count], 0, "i64"), ctx.reshape(index, [1, count])])
    first = ctx.reduce("reduce_min", ctx.pointwise("where", [names, ctx.iota([size, count], 1, "i64"),
                                                             ctx.scalar(float(count), "i64")]), [1], False)
    hit = ctx.reshape(ctx.pointwise("less", [first, ctx.scalar(float(count), "i64")]), line)
    slot = ctx.pointwise("min", [first, ctx.scalar(float(count - 1), "i64")])
    return ctx.pointwise("where", [ctx.broadcast_to(hit, shape), ctx.gather(values, slot, dim), x])


def _why_not_index_put(node) -> Optional[str]:
    x, indices = (a.meta.get("val") if hasattr(a, "meta") else a for a in node.args[:2])
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if accumulate:
        return "accumulate=True (a sum at repeated indices)"
    used = [i for i in indices if i is not None]
    if len(used) != 1:
        return "an index tensor on more than one dim"
    index = used[0].meta.get("val") if hasattr(used[0], "meta") else used[0]
    if not isinstance(index, torch.Tensor) or index.dim() != 1 or index.dtype not in (torch.int64, torch.int32):
        return "an index other than one integer vector"
    if not isinstance(x, torch.Tensor) or any(isinstance(d, torch.SymInt) for d in (*x.shape, *index.shape)):
        return "symbolic sizes"
    return None


index_put.why_not = _why_not_index_put


@handles("aten.constant_pad_nd.default")
def constant_pad_nd(ctx: Context, x: Value, pad: Sequence[int], value: float = 0.0) -> Value:
    """PyTorch's pad list runs from the last dim backwards: (last_begin, last_end, ...)."""
    dtype = ctx.dtype_of(x)
    rank = ctx.rank(x)
    for i in range(len(pad) // 2):
        dim = rank - 1 - i
        begin, end = int(pad[2 * i]), int(pad[2 * i + 1])
        size = ctx.shape_of(x)[dim]
        if begin < 0 or end < 0:
            x = ctx.slice(x, [max(-begin, 0)], [size - max(-end, 0)], [dim], [1])
        parts = []
        for count in (max(begin, 0), None, max(end, 0)):
            if count is None:
                parts.append(x)
            elif count > 0:
                shape = ctx.shape_of(x)
                shape[dim] = count
                parts.append(ctx.broadcast_to(ctx.scalar(float(value), dtype), shape))
        if len(parts) > 1:
            x = ctx.concat(parts, dim)
    return x


@handles("aten.flip.default")
def flip(ctx: Context, x: Value, dims: Sequence[int]) -> Value:
    """Each named dim read backwards: a slice with step -1 (from the last element past the first)."""
    rank = ctx.rank(x)
    axes = sorted({ctx.normalize_dim(d, rank) for d in dims})
    if not axes:
        return x
    return ctx.slice(x, [-1] * len(axes), [-(2**62)] * len(axes), axes, [-1] * len(axes))


@handles("aten.slice_scatter.default")
def slice_scatter(ctx: Context, x: Value, src: Value, dim: int = 0, start: Optional[int] = None,
                  end: Optional[int] = None, step: int = 1) -> Value:
    """x with x[start:end] along dim replaced by src (x[:, :1] = v, functionalized): the parts
    of x before and after, and src between them."""
    check(step == 1, "slice_scatter with a step other than 1")
    dim = ctx.normalize_dim(dim, ctx.rank(x))
    size = ctx.shape_of(x)[dim]
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None or end >= _INT64_MAX else (end + size if end < 0 else end)
    start, end = max(0, min(start, size)), max(0, min(end, size))
    parts = []
    if start > 0:
        parts.append(ctx.slice(x, [0], [start], [dim], [1]))
    parts.append(ctx.cast(src, ctx.dtype_of(x)))
    if end < size:
        parts.append(ctx.slice(x, [end], [size], [dim], [1]))
    return parts[0] if len(parts) == 1 else ctx.concat(parts, dim)
