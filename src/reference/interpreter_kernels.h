// Internal to the reference interpreter: the kernels of each op family and the index
// helpers they share. Every kernel reads its operands as row-major f64 arrays and
// writes `out`, which the driver has sized to the node's element count; the driver
// rounds the result to the node's dtype afterwards, so kernels compute in plain f64.
#pragma once

#include <cstdint>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::interpreter {

using Values = std::vector<double>;

// One input of a node as the kernels see it.
struct Operand {
  const Values* values;
  const Shape* shape;
  DType dtype;

  const double* data() const { return values->data(); }
  int rank() const { return static_cast<int>(shape->size()); }
  int64_t dim(int d) const { return (*shape)[d]; }
};

// ---- kernels, one family per file
Status ComputePointwise(const Node& node, const std::vector<Operand>& in, Values& out);    // + iota, random
Status ComputeView(const Node& node, const std::vector<Operand>& in, Values& out);         // + broadcast, gathers
// With `accumulate_in_dtype`, sums, means and products add term by term in the node's
// dtype (each partial result rounded to it, as a plain f32 loop would) instead of f64.
Status ComputeReduction(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype = false);
Status ComputeMatMul(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype = false);
Status ComputeWindow(const Node& node, const std::vector<Operand>& in, Values& out);       // conv, pools, window
Status ComputeComposite(const Node& node, const std::vector<Operand>& in, Values& out);
// attention_grad_q, _k, _v (in: dout, q, k, v, out, logsumexp).
Status ComputeAttentionGrad(const Node& node, const std::vector<Operand>& in, Values& out);

// ---- index helpers

// Product of shape[begin, end).
int64_t DimProduct(const Shape& shape, int begin, int end);

// Steps `index` to the next multi-index of `shape` in row-major order; false after the
// last one.
bool NextIndex(std::vector<int64_t>& index, const Shape& shape);

// Strides (in elements) that read an input of `in_shape` broadcast to `out_shape`
// (numpy, right-aligned): one per output dim, 0 where the input is broadcast.
std::vector<int64_t> BroadcastStrides(const Shape& in_shape, const Shape& out_shape);

// Calls fn(flat, offset) for every element of `shape` in row-major order, where `flat`
// counts 0, 1, 2, ... and offset = base + Σ index[d] * strides[d]. The innermost dim
// runs as a plain loop, so this is as fast as a hand-written nest.
template <typename Fn>
void ForEachStrided(const Shape& shape, const std::vector<int64_t>& strides, int64_t base, Fn&& fn) {
  int64_t total = NumElements(shape);
  if (total == 0) return;
  int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    fn(int64_t{0}, base);
    return;
  }
  int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  std::vector<int64_t> outer_index(rank - 1, 0);
  Shape outer_shape(shape.begin(), shape.end() - 1);
  int64_t flat = 0;
  do {
    int64_t offset = base;
    for (int d = 0; d + 1 < rank; ++d) offset += outer_index[d] * strides[d];
    for (int64_t i = 0; i < inner; ++i) fn(flat++, offset + i * inner_stride);
  } while (NextIndex(outer_index, outer_shape));
}

}  // namespace tilefuse::interpreter
