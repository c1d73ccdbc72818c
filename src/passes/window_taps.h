// The pieces the window rewrite (passes/window_ops) builds its NCHW and its channels-last
// forms from: one tap of a window as a view, taps combined pairwise, and average pooling's
// divisors.
#pragma once

#include <functional>
#include <optional>

#include "tilefuse/builder.h"

namespace tilefuse::window_taps {

int64_t Product(const std::vector<int64_t>& v, size_t begin = 0);
// Max pool's fill: below every value of the dtype.
double LowestValue(DType dtype);
PoolParams ParamsOf(const Attrs& a);
// The last `count` axes of a rank-`rank` tensor.
std::vector<int64_t> TrailingAxes(int rank, int count);
// 1×1, unit strides, no padding: the window is x itself.
bool IsPointwiseReshape(const Attrs& a);

// Windows of at most this many taps are combined tap by tap as pointwise ops (a sum of
// products, a max): one pointwise kernel whose loads are affine along an output row, which
// vectorises across output positions on the CPU and gives each GPU thread one output. More
// taps are reduced as a row (the window's last axes).
constexpr int64_t kMaxUnrolledTaps = 49;

// Tap k (row-major over the kernel) of the windows of NCHW x: [N, C, out...].
Value Tap(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, int64_t k);

// Combines the taps of x's windows pairwise with `op` (add, max), in tap order; `term`
// maps each tap first (for channels-last, it moves the channels last).
Value CombineTaps(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, OpCode op,
                  const std::function<Value(Value, int64_t)>& term);

// The divisor of each average-pool output position ([out...]): the window positions inside
// the input, or inside the padded input with count_include_pad (ONNX). Nullopt when every
// position has the full window.
std::optional<Tensor> AverageDivisors(const Attrs& a, const Shape& in, const Shape& out);

// A window sum divided by its count (AverageDivisors); `in` and `out` NCHW. With
// channels_last, `sum` is [N, out..., C] and the divisors broadcast along its last axis.
Value AverageOf(GraphBuilder& b, Value sum, const Attrs& a, const Shape& in, const Shape& out, bool channels_last);

}  // namespace tilefuse::window_taps
