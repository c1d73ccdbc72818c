// An operand of a library (cuBLASLt) product that its prologue only views: read where it lies,
// with a leading dimension and a batch stride, instead of the prologue's copy. Attention split
// into its parts (f32, which the attention template does not take) multiplies q, k and v as
// [batch, heads, T, d] views of their projection's output ([T, 3·heads·d] for GPT-2's QKV): each
// head is a matrix of T rows 3·heads·d apart, the heads d apart — three prologue copies a layer
// that cuBLASLt's strided layouts make unnecessary.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// operand[b][r][c] (b over the operand's leading dims flattened, r and c its last two) is
// node[offset + b·batch_stride + r·row_stride + c] (transposed: node[offset + b·batch_stride +
// c·row_stride + r], the operand's columns stored as rows).
struct LibraryOperandView {
  int node = -1;
  int64_t offset = 0;
  int64_t row_stride = 0;
  int64_t batch_stride = 0;
  bool transposed = false;
};

// The view through which `prologue` (a group computing `operand` alone) reads another value
// with no arithmetic and the same dtype, where cuBLASLt can read it so: one batch stride over
// the operand's leading dims, a row stride at least the stored row's length, and 16-byte
// aligned offsets and strides; nullopt otherwise (the prologue then copies).
std::optional<LibraryOperandView> FindLibraryOperandView(const Graph& graph, const FusionGroup& prologue,
                                                         const std::vector<bool>& inlined, int operand);

}  // namespace tilefuse
