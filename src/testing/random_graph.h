// Random valid graphs for differential testing: a generated graph, compiled by
// tilefuse, must give the reference interpreter's outputs (within dtype tolerance).
//
// Graphs mix pointwise, broadcast, view, reduction, matmul, cast, iota-mask and
// dropout ops over random shapes (rank 0..max_rank) and float dtypes, plus softmax,
// layer-norm, attention (single- and multi-head, masked), GEMM-epilogue (bias,
// activation, residual) and convolution-block patterns. Two properties make them
// usable as an oracle:
//   * values stay tame: every op's magnitude is bounded from its inputs' bounds and
//     operands are squashed before a result could overflow (f16 included); domains are
//     guarded (log(|x|+1), sqrt(|x|), x / (|y|+1), exp of bounded arguments), so the
//     reference gives finite outputs on Tensor::Random inputs (values in [-1, 1));
//   * comparisons (the only discontinuous ops) read only values that every correct
//     implementation computes bit-exactly (parameters, iota, random_uniform, and views,
//     negations, casts, max/min of those), so a mask cannot flip on rounding noise.
// Integer and bool tensors appear only as masks and conditions.
//
// Deterministic per seed on every platform: one std::mt19937_64 and no std::
// distributions (their output is implementation-defined).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct RandomGraphOptions {
  uint64_t seed = 0;
  // Number of generation steps; a step adds one op or one small pattern of ops.
  int min_ops = 4, max_ops = 24;
  // Float dtypes for parameters and casts. f32, when listed, is picked most often.
  std::vector<DType> dtypes = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
  bool allow_matmul = true;     // 2-D and batched matmul, attention and GEMM-epilogue patterns
  // Layer patterns: GEMM epilogues, multi-head attention, convolution blocks (conv, folded
  // batch norm, ReLU, residual, pool). Added later: false gives each seed the graph it
  // gave before them (so seeds reported earlier replay).
  bool allow_layer_patterns = true;
  bool allow_dropout = true;    // random_uniform >= ratio → where(mask, x * scale, 0)
  bool allow_reductions = true; // reductions, softmax and layer-norm patterns
  bool allow_views = true;      // reshape, transpose, slice, squeeze/unsqueeze, concat, split
  bool allow_broadcast = true;  // explicit broadcasts, binary ops on smaller shapes (scalars
                                // and the broadcasts inside patterns stay)
  bool allow_casts = true;      // casts between the listed dtypes
  bool allow_masks = true;      // comparisons and iota masks feeding where (dropout's stays)
  bool allow_multiple_outputs = true;
  int max_inputs = 3;           // graph parameters: 1..max_inputs
  int max_rank = 4;
  int64_t max_elements = 4096;  // per tensor, so the f64 reference stays fast
};

// One line that names every option, for "replay with ..." messages, e.g.
// "seed=7 ops=4..24 dtypes=f32,f16,bf16,f64 max_rank=4 max_elements=4096 max_inputs=3 all ops".
std::string DescribeRandomGraphOptions(const RandomGraphOptions& options);

// A verified graph; InvalidArgument when the options are inconsistent (no dtypes, a
// non-float dtype, min_ops > max_ops, ...).
StatusOr<Graph> GenerateRandomGraph(const RandomGraphOptions& options);

}  // namespace tilefuse
