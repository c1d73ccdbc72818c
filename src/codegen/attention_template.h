// The GPU attention template's view of an attention group: the AttentionKernel the CPU
// flash kernel is printed from (codegen/attention_lower.h), with Q, Kᵀ and V read by TMA
// straight from the graph values they are views of — reshaped and transposed heads, a
// slice of a fused QKV projection, K/V heads shared by several query heads (GQA) — never
// packed or copied.
//
// Each operand's element (batch coordinates o, row r, column c) lives at
//
//   offset + row_stride·r + column_stride·c + Σ stride·(o[dim] / divisor)
//
// in its value, one of the two matrix strides being 1: the form a tensor map addresses
// (the contiguous dimension first, then the other matrix dimension, then one dimension per
// batch term). A scalar scale on an operand (q · c) folds into the score or the output;
// operands computed otherwise inside the group (a cast to another type, a sum) are refused
// with the reason, as are dtypes, head dims and alignments the kernel does not take.
// The safe softmax's where(isnan(p), 0, p) is taken: rows without probabilities (fully
// masked) come out 0 (zero_nan_rows), as on the CPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/gemm_template.h"
#include "codegen/index_expr.h"
#include "codegen/kernel.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct StridedOperand {
  struct BatchTerm {
    int dim = 0;          // output batch dimension
    int64_t divisor = 1;  // coordinate = o[dim] / divisor (GQA: query heads per K/V head)
    int64_t extent = 1;   // the coordinate's range
    int64_t stride = 0;   // elements
  };
  int node = -1;  // the graph value TMA reads
  DType dtype = DType::kBF16;
  int64_t offset = 0;  // elements
  int64_t rows = 0, columns = 0;
  int64_t row_stride = 0, column_stride = 0;  // elements; one of them is 1
  std::vector<BatchTerm> batch;               // at most three
  double scale = 1;  // a scalar the graph multiplies the view by (folded into the products)
  bool RowsContiguous() const { return row_stride == 1; }
};

// A KV cache's update at one position, folded into the decode form of the attention that
// reads the updated caches (backend/cuda/cuda_cache_update_fold.h): K and V then read the
// caches as they were (their nodes are the caches'), the key at `position` replaced by the new
// rows, and the kernel writes those rows into the updated caches (copying the other keys there
// where an updated cache is not the cache's own memory).
struct DecodeCacheUpdateFold {
  int position = -1;  // node: the key written, an integer of one element
  DType position_dtype = DType::kI64;
  // The new key's dims (the row variable, as Kᵀ's) and the new value's (the column variable, as
  // V's) in their nodes, with K's and V's batch terms, in order; the key variable has no term.
  StridedOperand k_row, v_row;
  int k_updated = -1, v_updated = -1;  // nodes: the updated caches, laid out as the caches
  // The caches' elements and where a flat element's key is: (e / key_stride) % keys.
  int64_t k_elements = 0, v_elements = 0, k_key_stride = 1, v_key_stride = 1, keys = 0;
};

// The attention's output projection computed in its decode form (attention_decode_projection.cuh):
// the skinny product whose A is the attention's output (one token's heads side by side), its B a
// weight of 64 columns a head; the attention's own output is then never stored.
struct DecodeProjectionFold {
  GemmTemplateKernel product;  // its B, epilogue and outputs
  int heads = 0;               // a batch entry's heads: the CTAs of a cluster, 64 columns each
};

struct AttentionTemplateKernel {
  std::string name;
  DType dtype = DType::kBF16;  // Q, K, V and the output; f32 scores and accumulators
  StridedOperand q;            // [nq][d]
  StridedOperand k;            // Kᵀ: [d][nk]
  StridedOperand v;            // [nk][dv]
  Shape batch_shape;           // the output's batch dims (one CTA row per flat entry)
  int64_t nq = 0, nk = 0, d = 0, dv = 0;
  double score_scale = 1;   // Q's and Kᵀ's scalar scales: each score is Q·Kᵀ times this
  double output_scale = 1;  // V's: the output is P·V times this
  // The safe softmax's guard (AttentionKernel::zero_nan_rows): a row whose sum of
  // probabilities is not positive (every key masked, a NaN or +inf logit) is written as zeros.
  bool zero_nan_rows = false;
  // The logits program of AttentionKernel (loop variable 0: the flat score row, 1: the key;
  // loads of buffer -1 read the score), its scores' batch for output batch entry
  // (variable 0), and the buffers its other loads read.
  Kernel logits;
  int logit = -1;
  Index score_batch_index;
  std::vector<KernelBuffer> buffers;  // AttentionKernel's: the logits' loads index them
  int output = -1;                    // buffer of the output [batch..][nq][dv], contiguous
  int logsumexp = -1;                 // buffer of the rows' logsumexp [batch..][nq], f32, or -1 (AttentionKernel's)
  // nq, nk and the batch dims in the model's symbols, and the symbols' values (AttentionKernel's;
  // `symbols` empty without symbolic dims).
  SymExpr nq_size, nk_size;
  std::vector<SymExpr> batch_sizes;
  std::vector<int64_t> symbols;
  // Do the symbols give the lengths and the batch (then the kernel takes them at launch)?
  bool SizesAtLaunch() const;
  std::optional<DecodeCacheUpdateFold> cache_update;  // decode form only
  std::optional<DecodeProjectionFold> projection;     // decode form only
};

// The template form of attention `group`, or why it does not apply (the caller plans the
// group's parts separately and reports the reason).
// With `symbolic` (the graph's InferSymbolicShapes), the sizes are known in the model's symbols too.
StatusOr<AttentionTemplateKernel> LowerAttentionTemplate(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined,
                                                         const SymbolicShapes* symbolic = nullptr);

}  // namespace tilefuse
