// Reductions of the reference interpreter: sum, max, min, mean, prod over any set of
// axes. The input is walked once in row-major order; each element is folded into the
// output element it maps to (reduced dims have output stride 0), by the reduction's
// combiner from ops.def (ir/reduction_traits.h), starting from its identity.
#include "reference/interpreter_kernels.h"
#include "ir/reduction_traits.h"
#include "ir/scalar_eval.h"

namespace tilefuse::interpreter {

namespace {

// For each input dim, the stride of the output element it lands in: the keepdims
// output's stride for kept dims, 0 for reduced ones. The keepdims and squeezed outputs
// share one row-major layout, so this serves both.
std::vector<int64_t> OutputStridesPerInputDim(const Shape& in_shape, const std::vector<int64_t>& axes) {
  Shape kept = in_shape;
  for (int64_t axis : axes) kept[axis] = 1;
  std::vector<int64_t> strides = RowMajorStrides(kept);
  for (int64_t axis : axes) strides[axis] = 0;
  return strides;
}

template <typename Fold>
void FoldInto(const Operand& in, const std::vector<int64_t>& out_strides, Values& out, Fold fold) {
  const double* src = in.data();
  ForEachStrided(*in.shape, out_strides, 0, [&](int64_t flat, int64_t offset) {
    out[offset] = fold(out[offset], src[flat]);
  });
}

}  // namespace

Status ComputeReduction(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype) {
  const Operand& x = in[0];
  const ReductionTraits& traits = GetReductionTraits(node.op);
  std::fill(out.begin(), out.end(), traits.identity);
  std::vector<int64_t> strides = OutputStridesPerInputDim(*x.shape, node.attrs.axes);
  // Rounding leaves max and min unchanged: they select an element, already in the dtype.
  DType dtype = accumulate_in_dtype ? node.dtype : DType::kF64;
  FoldInto(x, strides, out, [&traits, dtype](double acc, double v) {
    return RoundToDType(EvaluateScalarOp(traits.combiner, acc, v), dtype);
  });
  if (traits.divides_by_count) {
    int64_t count = 1;
    for (int64_t axis : node.attrs.axes) count *= x.dim(static_cast<int>(axis));
    // An empty mean is 0 / 0 = NaN, as numpy gives.
    for (double& v : out) v /= static_cast<double>(count);
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
