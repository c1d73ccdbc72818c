// Attention groups → one flash-attention kernel (printed by cpp_attention_emitter).
// The group the attention matcher claimed must read as
//
//   Q  ─┐                                               V ─┐
//       matmul ─ logits ─ exp(· − row max) ─ ÷ row sum ─ [casts] ─ matmul ─ out
//   Kᵀ ─┘        (scale, causal or additive masks, bias: pointwise per score)
//                          row max + log(row sum) ─ the rows' logsumexp (optional output)
//
// with, as torch.onnx's dynamo exporter writes SDPA, an optional "safe softmax" guard
// where(isnan(p), 0, p) (or where(not isnan(p), p, 0), casts on either side) between the
// division and P·V: fully masked rows then come out 0 instead of NaN.
//
// The logits are a scalar program per (score row, key) whose loads of the Q·Kᵀ product
// read the dot product the kernel has just computed; the row max and row sum become the
// running max and sum of the online softmax (softmax is shift-invariant, so the running
// max may replace the graph's max). Q, Kᵀ and V may be views (reshaped heads, transposed
// keys) or half types: they are packed into arrays of the compute type first, by a
// pointwise program per operand (Q is read in place when a graph buffer of that type
// holds it). No N×N tensor exists at any point.
#pragma once

#include <string>
#include <vector>

#include "codegen/index_expr.h"
#include "codegen/kernel.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// One matmul operand as the kernel reads it: [batch..., rows, columns], row-major.
struct AttentionOperand {
  int node = -1;
  int64_t elements = 0;
  // Flat offset of this operand's batch for output batch `batch` (loop variable 0):
  // the matmuls broadcast batch dims.
  Index batch_index;
  int buffer = -1;      // read in place from this kernel buffer, or
  Kernel pack;          // packed by this program over loop variable 0 = flat offset
  int pack_value = -1;  // (its result; -1 when read in place)
};

struct AttentionKernel {
  std::string name;
  std::vector<int> nodes;             // the group's members
  std::vector<KernelBuffer> buffers;  // argument order; the output is one of them
  DType compute = DType::kF32;        // f32, or f64 when the group holds f64 values
  AttentionOperand q, k, v;           // Q [.., nq, d], Kᵀ [.., d, nk], V [.., nk, dv]
  int64_t batch = 1;                  // output batch elements (flat over its batch dims)
  int64_t nq = 0, nk = 0, d = 0, dv = 0;
  Index score_batch_index;            // like the operands': the scores' batch
  // The logit of (score row, key): loop variable 0 is the flat row of the scores
  // [.., nq, nk], variable 1 the key. Loads with buffer -1 read the Q·Kᵀ dot product.
  Kernel logits;
  int logit = -1;
  DType score_dtype = DType::kF32;  // the Q·Kᵀ matmul's dtype
  int output = -1;                  // buffer of the P·V matmul's result, [batch.., nq, dv]
  // Buffer of the rows' logsumexp where the group has it as an output (a training forward
  // saves it), else -1: one value per score row (log Σ exp(logit) over the keys), in f32 or f64.
  int logsumexp = -1;
  // The safe-softmax guard: rows whose probabilities are NaN come out 0. With the max
  // subtracted, a row's probabilities are NaN all together or not at all — exactly when its
  // sum is 0 (every key masked, -inf) or NaN (a NaN or +inf logit) — so the kernel writes 0
  // where the running sum is not positive.
  bool zero_nan_rows = false;
  // What nq, nk and the output's batch dims are in the model's symbols (ir/symbolic_shapes.h),
  // and the symbols' values, where the graph has symbolic dims (empty `symbols` otherwise);
  // the logits program's and the batch indexes' constants carry the same expressions.
  SymExpr nq_size, nk_size;
  std::vector<SymExpr> batch_sizes;
  std::vector<int64_t> symbols;
  // Do the symbols give nq, nk and the batch (then a kernel may take them at launch)?
  bool SizesAtLaunch() const;
};

// Unimplemented, with the reason, for groups that do not have the shape above (another
// op between the softmax and P·V, a log-softmax, a reduction inside the logits, ...):
// the caller runs them on the reference kernels and reports the reason.
// With `symbolic` (the graph's InferSymbolicShapes), the sizes are known in the model's symbols too.
StatusOr<AttentionKernel> LowerAttention(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined,
                                         const SymbolicShapes* symbolic = nullptr);

}  // namespace tilefuse
