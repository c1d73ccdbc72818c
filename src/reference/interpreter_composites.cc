// Composite ops computed directly in f64 by the reference interpreter, so that the
// decompositions of passes/decompose are checked against an independent formula:
// softmax and log-softmax over one axis, layer norm over the trailing dims, and GELU.
#include <cmath>
#include <limits>

#include "reference/interpreter_kernels.h"
#include "ir/scalar_library.h"
#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// Softmax (opset >= 13): over attrs.axis only, max-subtracted for stability. A rank-0
// input is a single row of one element.
void Softmax(const Node& node, const Operand& x, Values& out, bool log_form) {
  int rank = x.rank(), axis = static_cast<int>(node.attrs.axis);
  int64_t outer = rank == 0 ? 1 : DimProduct(*x.shape, 0, axis);
  int64_t extent = rank == 0 ? 1 : x.dim(axis);
  int64_t inner = rank == 0 ? 1 : DimProduct(*x.shape, axis + 1, rank);
  const double* src = x.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * extent * inner + i;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < extent; ++j) max = scalar::max_nan(max, src[base + j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < extent; ++j) sum += std::exp(src[base + j * inner] - max);
      double log_sum = std::log(sum);
      for (int64_t j = 0; j < extent; ++j) {
        double shifted = src[base + j * inner] - max;
        out[base + j * inner] = log_form ? shifted - log_sum : std::exp(shifted) / sum;
      }
    }
  }
}

// LayerNorm: each row is the dims attrs.axis..end; population variance (two passes).
void LayerNorm(const Node& node, const std::vector<Operand>& in, Values& out) {
  const Operand& x = in[0];
  int rank = x.rank(), axis = static_cast<int>(node.attrs.axis);
  int64_t rows = rank == 0 ? 1 : DimProduct(*x.shape, 0, axis);
  int64_t row_size = rank == 0 ? 1 : DimProduct(*x.shape, axis, rank);
  const double* scale = in[1].data();
  const double* bias = in.size() > 2 ? in[2].data() : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * row_size;
    double mean = 0, variance = 0;
    for (int64_t j = 0; j < row_size; ++j) mean += row[j];
    mean /= static_cast<double>(row_size);
    for (int64_t j = 0; j < row_size; ++j) variance += (row[j] - mean) * (row[j] - mean);
    variance /= static_cast<double>(row_size);
    double inv_std = 1.0 / std::sqrt(variance + node.attrs.epsilon);
    for (int64_t j = 0; j < row_size; ++j) {
      double y = (row[j] - mean) * inv_std * scale[j];
      out[r * row_size + j] = bias ? y + bias[j] : y;
    }
  }
}

double Gelu(double x, bool approximate_tanh) {
  if (approximate_tanh) {
    const double sqrt_2_over_pi = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

}  // namespace

Status ComputeComposite(const Node& node, const std::vector<Operand>& in, Values& out) {
  switch (node.op) {
    case OpCode::kSoftmax: Softmax(node, in[0], out, /*log_form=*/false); break;
    case OpCode::kLogSoftmax: Softmax(node, in[0], out, /*log_form=*/true); break;
    case OpCode::kLayerNorm: LayerNorm(node, in, out); break;
    case OpCode::kGelu:
      for (size_t i = 0; i < out.size(); ++i) out[i] = Gelu(in[0].data()[i], node.attrs.approximate_tanh);
      break;
    default: TF_UNREACHABLE("not a composite op");
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
