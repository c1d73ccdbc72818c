// Reductions of the reference interpreter: sum, max, min, mean, prod over any set of
// axes. The input is walked once in row-major order; each element is folded into the
// output element it maps to (reduced dims have output stride 0).
#include <limits>

#include "backend/cpu/interpreter_kernels.h"
#include "ir/scalar_library.h"
#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// Identity of each reduction: the result of reducing nothing.
double Identity(OpCode op) {
  switch (op) {
    case OpCode::kReduceSum: case OpCode::kReduceMean: return 0.0;
    case OpCode::kReduceProd: return 1.0;
    case OpCode::kReduceMax: return -std::numeric_limits<double>::infinity();
    case OpCode::kReduceMin: return std::numeric_limits<double>::infinity();
    default: TF_UNREACHABLE("not a reduction");
  }
  return 0;
}

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
  std::fill(out.begin(), out.end(), Identity(node.op));
  std::vector<int64_t> strides = OutputStridesPerInputDim(*x.shape, node.attrs.axes);
  DType dtype = accumulate_in_dtype ? node.dtype : DType::kF64;
  switch (node.op) {
    case OpCode::kReduceSum:
    case OpCode::kReduceMean:
      FoldInto(x, strides, out, [dtype](double acc, double v) { return RoundToDType(acc + v, dtype); });
      break;
    case OpCode::kReduceProd:
      FoldInto(x, strides, out, [dtype](double acc, double v) { return RoundToDType(acc * v, dtype); });
      break;
    case OpCode::kReduceMax: FoldInto(x, strides, out, [](double acc, double v) { return scalar::max_nan(acc, v); }); break;
    case OpCode::kReduceMin: FoldInto(x, strides, out, [](double acc, double v) { return scalar::min_nan(acc, v); }); break;
    default: TF_UNREACHABLE("not a reduction");
  }
  if (node.op == OpCode::kReduceMean) {
    int64_t count = 1;
    for (int64_t axis : node.attrs.axes) count *= x.dim(static_cast<int>(axis));
    // An empty mean is 0 / 0 = NaN, as numpy gives.
    for (double& v : out) v /= static_cast<double>(count);
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
