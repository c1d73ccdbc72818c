// Transpose sinking: plans, once for the whole graph, which values are stored channels-last.
//
// The channels-last window rewrite (passes/window_ops_nhwc.h) brackets every convolution
// and pool with transposes: NHWC in ([0, 2, 3, 1]) and NCHW out ([0, 3, 1, 2]). Between two
// convolutions the pair would cancel but for the bias adds, activations, residual adds and
// means in between. This pass walks the graph once, in topological order, holding each
// value x as a value v of the new graph and a pending permutation: x = transpose(v, perm).
// A transpose back to NCHW ([0, 3, 1, 2], rank 4) starts a pending permutation instead of
// being built; the ops that can compute in v's layout take it along:
//
//   pointwise ops, concat   E(transpose(a, P), b) → transpose(E(a, transpose(b, P⁻¹)), P),
//                           when the inputs already in layout P are at least as many as
//                           those that would need a new transpose (constants, broadcasts,
//                           scalars and other transposes are free: they fold or compose)
//   broadcast, slice,       the same view on v, its attributes permuted
//   gather (1-D indices)
//   reductions              over v's axes perm[axes] (a global average pool over H, W
//                           becomes a reduction over NHWC's axes 1, 2)
//   reshape                 where the dims it merges or splits are contiguous in v
//   transpose               composed with the pending permutation; gone if the identity
//   window of kernel 1      (a depthwise convolution's or a pool's tap) a window over v seen
//                           as [N, 1, H, W, C]: the taps read v, not a transpose of it
//
// Every other reader (matmul, a product's window, a graph output...) gets the transpose built,
// once per value, simplified: transposes compose, the identity disappears, one that moves
// only size-1 dims is a reshape, a reshape of a reshape is one reshape, a transpose of a
// broadcast is a broadcast of the transposed (smaller) input.
//
//     conv₁ → T₁ → add bias → relu → T₂ → conv₂     T₁ = [0, 3, 1, 2], T₂ = [0, 2, 3, 1]
//   becomes
//     conv₁ → add bias' → relu → conv₂              (bias' broadcast along the last axis)
//
// One walk, no rewrite to a fixed point: the pass terminates by construction. An op reads
// an input through a new transpose only when at least as many of its inputs lose theirs.
// Only [0, 3, 1, 2] starts a layout, and [0, 2, 1, 3] of a product's columns reshaped into
// heads (q and k of attention, so that rotary embeddings compute in the product's layout);
// other transposes are only simplified. The graph's outputs and every value's logical shape
// stay as they were.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct SinkTransposesOptions {
  bool heads = true;  // [0, 2, 1, 3] of a product's heads starts a layout too
};

StatusOr<Graph> SinkTransposes(const Graph& graph, const SinkTransposesOptions& options = {});

}  // namespace tilefuse
