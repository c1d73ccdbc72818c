#include "passes/window_taps.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace tilefuse::window_taps {

int64_t Product(const std::vector<int64_t>& v, size_t begin) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin), v.end(), int64_t{1}, std::multiplies<>());
}

double LowestValue(DType dtype) {
  switch (dtype) {
    case DType::kI64: return -std::ldexp(1.0, 63);
    case DType::kI32: return -std::ldexp(1.0, 31);
    case DType::kI8: return -128;
    case DType::kU8: case DType::kBool: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

PoolParams ParamsOf(const Attrs& a) {
  PoolParams p;
  p.kernel = a.kernel;
  p.strides = a.strides;
  p.pads = a.pads;
  p.dilations = a.dilations;
  return p;
}

std::vector<int64_t> TrailingAxes(int rank, int count) {
  std::vector<int64_t> axes;
  for (int d = rank - count; d < rank; ++d) axes.push_back(d);
  return axes;
}

bool IsPointwiseReshape(const Attrs& a) {
  for (size_t d = 0; d < a.kernel.size(); ++d)
    if (a.kernel[d] != 1 || a.strides[d] != 1 || a.pads[d] != 0 || a.pads[a.kernel.size() + d] != 0) return false;
  return true;
}

// Tap k (row-major over the kernel) of the windows of x: [N, C, out...], x at
// o·stride + k·dilation − pad, the fill outside. Each tap is a window of its own (kernel 1,
// the tap's offset as its padding, negative past the first pad) rather than a slice of one
// shared window: a window every tap read would be a node with many users, materialised.
Value Tap(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, int64_t k) {
  const int spatial = static_cast<int>(a.kernel.size());
  const Shape in = b.shape(x);
  PoolParams p;
  p.kernel.assign(spatial, 1);
  p.dilations.assign(spatial, 1);
  p.strides = a.strides;
  p.pads.assign(2 * spatial, 0);
  for (int d = spatial - 1; d >= 0; --d) {
    int64_t begin = a.pads[d] - (k % a.kernel[d]) * a.dilations[d];
    k /= a.kernel[d];
    p.pads[d] = begin;  // the output size (o_max·stride − begin < in + end) fixes the end
    p.pads[spatial + d] = (out[2 + d] - 1) * a.strides[d] + 1 - in[2 + d] - begin;
  }
  return b.Reshape(b.Window(x, fill, p), out);
}

Value CombineTaps(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, OpCode op,
                  const std::function<Value(Value, int64_t)>& term) {
  Value y;
  for (int64_t k = 0; k < Product(a.kernel); ++k) {
    Value t = term(Tap(b, x, fill, a, out, k), k);
    y = k == 0 ? t : b.Binary(op, y, t);
  }
  return y;
}

std::optional<Tensor> AverageDivisors(const Attrs& a, const Shape& in, const Shape& out) {
  const int spatial = static_cast<int>(a.kernel.size());
  Shape out_spatial(out.begin() + 2, out.end());
  std::vector<double> divisors;
  std::vector<int64_t> o(spatial, 0);
  bool uniform = true;
  const int64_t full = Product(a.kernel);
  for (int64_t flat = 0; flat < NumElements(out_spatial); ++flat) {
    int64_t count = 1;
    for (int d = 0; d < spatial; ++d) {
      int64_t inside = 0;
      for (int64_t k = 0; k < a.kernel[d]; ++k) {
        int64_t pos = o[d] * a.strides[d] + k * a.dilations[d] - a.pads[d];
        int64_t lo = a.count_include_pad ? -a.pads[d] : 0;
        int64_t hi = in[2 + d] + (a.count_include_pad ? a.pads[spatial + d] : 0);
        inside += pos >= lo && pos < hi;
      }
      count *= inside;
    }
    uniform = uniform && count == full;
    divisors.push_back(static_cast<double>(count));
    for (int d = spatial - 1; d >= 0 && ++o[d] == out_spatial[d]; --d) o[d] = 0;
  }
  if (uniform) return std::nullopt;
  return Tensor::FromDoubles(DType::kF32, out_spatial, divisors);
}

Value AverageOf(GraphBuilder& b, Value sum, const Attrs& a, const Shape& in, const Shape& out, bool channels_last) {
  std::optional<Tensor> divisors = AverageDivisors(a, in, out);
  if (!divisors) return b.MulScalar(sum, 1.0 / static_cast<double>(Product(a.kernel)));
  Value divisor = b.Cast(b.Constant(std::move(*divisors)), b.dtype(sum));
  if (channels_last) {  // [out..., 1]: one divisor for every channel of a position
    Shape per_position = b.shape(divisor);
    per_position.push_back(1);
    divisor = b.Reshape(divisor, per_position);
  }
  return b.Div(sum, divisor);
}

}  // namespace tilefuse::window_taps
