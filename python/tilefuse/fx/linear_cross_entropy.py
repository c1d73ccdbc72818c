"""A language model's final linear and its cross-entropy, fused and chunked over the rows.

`F.cross_entropy(F.linear(h, W, b), target)` materialises the logits, [tokens, vocabulary]
(1 GiB in bf16 at 4096 tokens and a 128K vocabulary), keeps them for the backward, and writes
their gradient, as large, there. Here the rows go through in chunks (Liger Kernel's fused linear
cross-entropy, with tilefuse's row kernel for the loss): a chunk's logits (F.linear: cuBLAS on the
GPU), its per-row loss and the logits' gradient in one tilefuse-compiled row kernel, then at once
its share of the gradients of h, W and b; the chunk's logits and their gradient are dropped before
the next chunk's. The forward so computes the gradients, and the backward only scales them by the
loss's gradient. The logits never exist whole: the memory the loss takes beyond the gradients is
a chunk of them (a quarter by default) on the GPU, where the row kernel writes the gradient over
the logits it read, and two chunks elsewhere.

`fuse_linear_cross_entropy(gm)` rewrites Dynamo's graph before AOTAutograd: a cross-entropy
(mean or sum, no class weights, no label smoothing) whose input is a linear's output, through
views and a cast to f32 only and read by nothing else, becomes `linear_cross_entropy`, a call of
the `tilefuse::linear_cross_entropy` op with its gradient formula. It runs in PyTorch (a graph
tilefuse splits around it) and calls its own tilefuse kernel. `linear_cross_entropy` is also the
API for code that calls it directly.
"""

from __future__ import annotations

import inspect
import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from ._dynamo_graph import bound_calls, example_value

# The logits go through in this many chunks of rows by default. Measured on an H200 (4096 tokens,
# 4096 features, 128K vocabulary, bf16, 2026-11-30): chunks of 1024 rows took 21.2 ms a step,
# of 512 23.4 and of 256 28.3 (the products' efficiency and their launches).
CHUNKS = 4
_MIN_CHUNK_ROWS = 256  # fewer rows leave the W-gradient's product starved (its reduction dim is the chunk's rows)


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: Optional[torch.Tensor] = None,
                         ignore_index: int = -100, reduction: str = "mean", chunk_rows: int = 0) -> torch.Tensor:
    """F.cross_entropy(F.linear(h, weight, bias).reshape(-1, vocabulary), target.reshape(-1),
    ignore_index=ignore_index, reduction=reduction) in f32 (f64 for f64 h), computed in chunks of `chunk_rows`
    rows of h (0: the default) without the logits ever whole. reduction: "mean" or "sum"."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"linear_cross_entropy: reduction must be 'mean' or 'sum', not {reduction!r}")
    if weight.dim() != 2 or h.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear_cross_entropy: h {tuple(h.shape)} and weight {tuple(weight.shape)} do not chain "
                         "(weight is [vocabulary, features])")
    if target.numel() != h.numel() // h.shape[-1]:
        raise ValueError(f"linear_cross_entropy: {target.numel()} targets for {h.numel() // h.shape[-1]} rows of h")
    return torch.ops.tilefuse.linear_cross_entropy(h, weight, bias, target, ignore_index, reduction, chunk_rows)[0]


def default_chunk_rows(rows: int) -> int:
    """CHUNKS chunks, each a multiple of 64 rows and at least _MIN_CHUNK_ROWS (or all rows)."""
    chunk = 64 * math.ceil(math.ceil(rows / CHUNKS) / 64)
    return min(rows, max(chunk, _MIN_CHUNK_ROWS))


@torch.library.custom_op("tilefuse::linear_cross_entropy", mutates_args=())
def _linear_cross_entropy_op(h: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], target: torch.Tensor,
                             ignore_index: int, reduction: str,
                             chunk_rows: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, its gradients w.r.t. h, weight and bias for a loss gradient of 1); the bias's is
    empty without a bias."""
    rows = h.reshape(-1, h.shape[-1])
    targets = target.reshape(-1)
    has_bias, vocabulary = bias is not None, weight.shape[0]
    bias_dtype = bias.dtype if has_bias else None
    padded = _padded_vocabulary(weight)
    if padded != vocabulary:
        # The products over a vocabulary padded to whole 64-word tiles: zero rows of W, and a
        # bias of the dtype's lowest value there, so that the padded logits add nothing to a
        # row's sum of exponentials and get a zero gradient. Rows of 50257 words (GPT-2's) are
        # not whole 16-byte units and cuBLAS ran its align-1 kernels on them: the three products
        # took 8.3 ms of a GPT-2 step at 8x512 against ~1.3 ms on aligned rows (H200, 2026-12-04).
        weight = F.pad(weight, (0, 0, 0, padded - vocabulary))
        fill = torch.full((padded - vocabulary,), torch.finfo(weight.dtype).min, dtype=weight.dtype, device=weight.device)
        bias = torch.cat([bias.to(weight.dtype) if has_bias else weight.new_zeros(vocabulary), fill])
    count = rows.shape[0]
    chunk = chunk_rows if chunk_rows > 0 else default_chunk_rows(count)
    wide = torch.promote_types(h.dtype, torch.float32)  # the loss's dtype
    valid = targets != ignore_index
    # The loss's scale, on the device (no synchronisation): 1 / the rows counted for a mean (an
    # empty mean is 0/0: NaN, as PyTorch's).
    scale = (1.0 / valid.sum().to(wide)) if reduction == "mean" else torch.ones((), dtype=wide, device=h.device)
    losses = torch.empty(count, dtype=wide, device=h.device)
    grad_rows = torch.empty_like(rows)
    # Accumulated in the weight's dtype over the chunks, as Liger's: an f32 accumulator would be
    # twice the weight's size. The first chunk's product writes it (no zeros read back).
    grad_weight = torch.empty_like(weight)
    grad_bias = torch.empty(weight.shape[0], dtype=wide, device=h.device) if has_bias else h.new_empty(0)
    kernel = _loss_kernel(ignore_index)
    picks = torch.where(valid, targets, 0).unsqueeze(1)  # each row's target column (0 where ignored)
    for start in range(0, count, chunk):
        end = min(start + chunk, count)
        piece = rows[start:end]
        logits = F.linear(piece, weight, bias)
        # The target's logit read here, before the row kernel may overwrite the logits with
        # their gradient.
        picked = logits.gather(1, picks[start:end])
        grad_logits = kernel(logits, targets[start:end], picked, scale, losses[start:end])
        del logits
        torch.mm(grad_logits, weight, out=grad_rows[start:end])
        if start == 0:
            torch.mm(grad_logits.t(), piece, out=grad_weight)
        else:
            grad_weight.addmm_(grad_logits.t(), piece)
        if has_bias and start == 0:
            torch.sum(grad_logits, 0, dtype=wide, out=grad_bias)
        elif has_bias:
            grad_bias.add_(grad_logits.sum(0, dtype=wide))
        del grad_logits
    total = losses.sum() * scale
    if padded != vocabulary:  # the padded rows' gradients are zeros: the first rows, whole rows, no copy
        grad_weight, grad_bias = grad_weight[:vocabulary], grad_bias[:vocabulary] if has_bias else grad_bias
    return total, grad_rows.view(h.shape), grad_weight, grad_bias.to(bias_dtype) if has_bias else grad_bias


# A vocabulary whose rows of logits are not whole 16-byte units is padded to 64 words (as
# TorchInductor's pad_mm pads a product's dimension) from this many words on.
_MIN_PADDED_VOCABULARY = 1024


def _padded_vocabulary(weight: torch.Tensor) -> int:
    """The words the chunks' products run over: the weight's, or that rounded up to 64 where
    a row of logits would not be whole 16-byte units."""
    vocabulary = weight.shape[0]
    if vocabulary < _MIN_PADDED_VOCABULARY or (vocabulary * weight.element_size()) % 16 == 0:
        return vocabulary
    return (vocabulary + 63) // 64 * 64


@_linear_cross_entropy_op.register_fake
def _(h, weight, bias, target, ignore_index, reduction, chunk_rows):
    return (h.new_empty((), dtype=torch.promote_types(h.dtype, torch.float32)), torch.empty_like(h), torch.empty_like(weight),
            torch.empty_like(bias) if bias is not None else h.new_empty(0))


def _setup_context(ctx, inputs, output):
    ctx.has_bias = inputs[2] is not None
    ctx.save_for_backward(*output[1:])


def _backward(ctx, grad_loss, *unused):
    # A 0-d loss gradient keeps each gradient's dtype and is multiplied in f32 (not rounded to
    # the gradients' half dtype first).
    grad_h, grad_weight, grad_bias = ctx.saved_tensors
    return (grad_h * grad_loss, grad_weight * grad_loss, grad_bias * grad_loss if ctx.has_bias else None, None, None, None, None)


_linear_cross_entropy_op.register_autograd(_backward, setup_context=_setup_context)


# The row kernel: per row of a chunk's logits x, loss = logsumexp(x) - x[target] (the target's
# logit given) and the logits' gradient (softmax(x) - onehot(target)) * scale, zeros for rows
# whose target is ignore_index. One tilefuse graph per ignore_index and chunk shape, dtype and
# device (the traced graph's views have the chunk's sizes): two per model, its chunks' and its
# last's.
_KERNELS: Dict[int, object] = {}

# Row kernel strategies (the GPU's) in which every thread reads each element it writes, before
# writing it, and every read of the row precedes the first write by a block or warp barrier:
# the gradient may then be written over the logits (one chunk-sized buffer instead of two).
_IN_PLACE_STRATEGIES = ("row: block per row", "row: warp per row")


def _loss_kernel(ignore_index: int):
    kernel = _KERNELS.get(ignore_index)
    if kernel is None:
        kernel = _KERNELS[ignore_index] = _RowKernel(ignore_index)
    return kernel


class _RowKernel:
    def __init__(self, ignore_index: int):
        self.ignore_index = ignore_index
        self.compiled: Dict[tuple, Tuple[object, bool]] = {}

    def __call__(self, logits, targets, picked, scale, losses):
        """Writes each row's loss into `losses`; returns the logits' gradient (on the GPU, where
        the compiled kernel allows it, written over the logits)."""
        key = (tuple(logits.shape), logits.dtype, logits.device)
        args = [logits, targets, picked, scale]
        if key not in self.compiled:
            self.compiled[key] = self._compile(args)
        specialization, in_place = self.compiled[key]
        if in_place:
            specialization.model.run_into(specialization.inputs_of(args), [losses, logits])
            return logits
        loss, gradient = specialization.run(args)
        losses.copy_(loss)
        return gradient

    def _compile(self, args):
        from torch.fx.experimental.proxy_tensor import make_fx

        from ..torch_backend import _DEFAULT_OPTIONS, _decompositions, _Specialization

        ignore_index = self.ignore_index

        def loss_and_gradient(logits, targets, picked, scale):
            wide = torch.promote_types(logits.dtype, torch.float32)  # f32, f64 for f64
            x = logits.to(wide)
            peak = x.amax(-1, keepdim=True)
            e = torch.exp(x - peak)
            total = e.sum(-1, keepdim=True)
            lse = torch.log(total) + peak
            valid = targets != ignore_index
            loss = torch.where(valid, (lse - picked.to(wide)).squeeze(1), 0.0)
            onehot = torch.arange(x.shape[1], device=x.device).unsqueeze(0) == torch.where(valid, targets, 0).unsqueeze(1)
            weight = torch.where(valid, scale, 0.0).unsqueeze(1)
            return loss, ((e / total - onehot.to(wide)) * weight).to(logits.dtype)

        gm = make_fx(loss_and_gradient, decomposition_table=_decompositions(), tracing_mode="fake")(*args)
        specialization = _Specialization(gm, args, set(), dict(_DEFAULT_OPTIONS))
        kernels = specialization.model.kernels
        in_place = (args[0].is_cuda and len(kernels) == 1 and kernels[0].kind == "row_reduction" and
                    kernels[0].strategy.startswith(_IN_PLACE_STRATEGIES) and
                    [tuple(o.shape) for o in specialization.model.outputs] == [tuple(args[0].shape[:1]), tuple(args[0].shape)])
        return specialization, in_place


# ---- the rewrite of Dynamo's graph ----

def _cross_entropy_signature(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                             label_smoothing=0.0):
    pass


_CE_SIGNATURE = inspect.signature(_cross_entropy_signature)
_LINEARS = {torch._C._nn.linear, F.linear}
_THROUGH_METHODS = {"view", "reshape", "float", "contiguous", "to"}  # between the linear and the cross-entropy


def _passes_through(node: torch.fx.Node) -> bool:
    """Whether node (between the linear and the loss) only reshapes its input's rows or casts it to f32."""
    if node.op == "call_method" and node.target in _THROUGH_METHODS:
        if node.target == "to":
            return len(node.args) == 2 and node.args[1] is torch.float32 and not node.kwargs
        return True
    return node.op == "call_function" and node.target is torch.reshape


def _linear_behind(node: torch.fx.Node):
    """The linear node behind the cross-entropy's input (through views and casts each read only
    there), and the nodes between; None where there is none."""
    chain = []
    while isinstance(node, torch.fx.Node) and len(node.users) == 1:
        if node.op == "call_function" and node.target in _LINEARS:
            return node, chain
        if not _passes_through(node):
            return None
        chain.append(node)
        node = node.args[0]
    return None


def fuse_linear_cross_entropy(gm: torch.fx.GraphModule) -> int:
    """Rewrites gm's cross-entropies of a linear's output that need gradients (see the module's
    docstring) in place; returns how many."""
    graph = gm.graph
    if any(n.op == "call_function" and "autocast" in getattr(n.target, "__name__", "") for n in graph.nodes):
        return 0  # under autocast the linear would run in the autocast dtype, the opaque op in the weights'
    rewritten = 0
    for node, a in bound_calls(gm, F.cross_entropy, _CE_SIGNATURE):
        if a["weight"] is not None or a["size_average"] is not None or a["reduce"] is not None or \
                a["label_smoothing"] != 0.0 or a["reduction"] not in ("mean", "sum") or not isinstance(a["ignore_index"], int):
            continue
        found = _linear_behind(a["input"])
        if found is None:
            continue
        linear, chain = found
        h, weight = linear.args[0], linear.args[1]
        bias = linear.args[2] if len(linear.args) > 2 else linear.kwargs.get("bias")
        logits, scores, loss = example_value(linear), example_value(a["input"]), example_value(node)
        values = [example_value(h), example_value(weight), logits, scores, loss, example_value(a["target"])]
        if not all(isinstance(v, torch.Tensor) for v in values) or not torch.is_grad_enabled():
            continue
        if not (example_value(h).requires_grad or example_value(weight).requires_grad):
            continue  # inference: the unfused loss is one read of the logits
        vocabulary = logits.shape[-1]
        if scores.dim() != 2 or tuple(scores.shape) != (logits.numel() // vocabulary, vocabulary) or \
                example_value(a["target"]).numel() != scores.shape[0] or not logits.dtype.is_floating_point:
            continue
        with graph.inserting_before(node):
            fused = graph.call_function(linear_cross_entropy, (h, weight, a["target"]),
                                        {"bias": bias, "ignore_index": a["ignore_index"], "reduction": a["reduction"]})
            if loss.dtype != torch.promote_types(logits.dtype, torch.float32):  # a cross-entropy of half logits is half
                fused = graph.call_method("to", (fused, loss.dtype))
        node.replace_all_uses_with(fused)
        graph.erase_node(node)
        for dead in chain + [linear]:
            graph.erase_node(dead)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten
