// Resize with scales or sizes known at import time. Every mode ONNX defines (nearest,
// linear, cubic, antialiased linear and cubic) is separable: along each resized axis,
// output element i is a fixed weighted sum of input elements, plus a constant for the
// tf_crop_and_resize rows that fall outside the input:
//
//   y[..., i, ...] = sum_j W[i, j] * x[..., j, ...] + c[i]
//
// The importer computes W and c in f64 exactly as the ONNX reference does (coordinate
// transformation, neighbours with edge padding, exclude_outside), then applies them one
// axis at a time, last axis first like the reference: a Gather when every row picks one
// input element (nearest), else a MatMul over the axis moved last.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// The attributes that decide the weights, as read from the node.
struct ResizeMode {
  std::string mode, coordinates, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool antialias = false, exclude_outside = false;
};

// One axis: W (out x in, row-major), c (out), and whether c is used at all.
struct AxisWeights {
  int64_t in = 0, out = 0;
  std::vector<double> weights, offsets;
  bool has_offsets = false;
};

void NearestCoefficients(double ratio, const std::string& mode, std::vector<double>& c) {
  if (ratio == std::floor(ratio)) c = {0, 1};
  else if (mode == "round_prefer_floor") c = {double(ratio <= 0.5), double(ratio > 0.5)};
  else if (mode == "round_prefer_ceil") c = {double(ratio < 0.5), double(ratio >= 0.5)};
  else if (mode == "floor") c = {1, 0};
  else c = {0, 1};  // ceil
}

double CubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
  if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
  return 0;
}

void Normalize(std::vector<double>& c) {
  double sum = 0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
}

// An output element's coefficients, into `c` (a buffer reused across the elements of an
// axis: no allocation an element, which millions of outputs made slow).
void Coefficients(const ResizeMode& m, double ratio, double scale, std::vector<double>& c) {
  double a = m.cubic_a;
  if (m.mode == "nearest") return NearestCoefficients(ratio, m.nearest_mode, c);
  if (m.mode == "linear" && !m.antialias) {
    c = {1 - ratio, ratio};
    return;
  }
  if (m.mode == "cubic" && !m.antialias) {
    double r1 = ratio + 1, s = 1 - ratio, s1 = s + 1;
    c = {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
         ((a + 2) * s - (a + 3)) * s * s + 1, ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a};
    return;
  }
  scale = std::min(scale, 1.0);  // antialiasing widens the kernel only when downsampling
  c.clear();
  if (m.mode == "linear") {
    auto start = static_cast<int64_t>(std::floor(-1 / scale) + 1);
    for (int64_t i = start; i < start + 2 - 2 * start; ++i)
      c.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * scale), 0.0, 1.0));
  } else {
    auto start = static_cast<int64_t>(std::floor(-2 / scale) + 1);
    for (int64_t i = start; i < 2 - start; ++i) c.push_back(CubicKernel(scale * (static_cast<double>(i) - ratio), a));
  }
  Normalize(c);
}

// The indexes [lo, lo + count): ascending, contiguous.
struct IndexWindow {
  int64_t lo = 0, count = 0;
};

// The n indexes of [0, limit) nearest to x, ties to the smaller. The distance is unimodal
// along the indexes, so they are a window grown from the nearest one, a step at a time to the
// nearer side (the lower on a tie): linear in n, where sorting every candidate by distance
// took seconds for an antialiased Resize of millions of taps an output (fuzzing).
IndexWindow NearestIndexes(double x, int64_t n, int64_t limit) {
  // A coordinate far outside [0, limit) has the edge's indexes nearest: clamped first, so that
  // floor() fits int64 (a NaN scale or roi made it NaN: UBSan, CI's folder fuzz slice, 2026-11-29).
  if (std::isnan(x) || n <= 0 || limit <= 0) return {};
  x = std::clamp(x, -double(n) - 2.0, double(limit) + double(n) + 2.0);
  auto center = static_cast<int64_t>(std::floor(x));
  const int64_t first = std::max<int64_t>(0, center - n - 1), end = std::min(limit, center + n + 2);
  if (first >= end || n <= 0) return {};
  auto distance = [x](int64_t p) { return std::fabs(x - double(p)); };
  int64_t lo = std::clamp(center, first, end - 1);
  if (const int64_t up = std::clamp(center + 1, first, end - 1); distance(up) < distance(lo)) lo = up;
  int64_t hi = lo + 1;  // the window [lo, hi)
  while (hi - lo < n && (lo > first || hi < end)) {
    if (lo > first && (hi == end || distance(lo - 1) <= distance(hi))) --lo;
    else ++hi;
  }
  return {lo, hi - lo};
}

// The taps an output element of an axis reads (the size of Coefficients' answer), in double:
// an antialiased kernel widens by 1 / scale when downsampling.
double TapsPerOutput(const ResizeMode& m, double scale) {
  if (m.mode == "nearest") return 2;
  if (!m.antialias) return m.mode == "linear" ? 2 : 4;
  return -2 * std::floor(-(m.mode == "linear" ? 1.0 : 2.0) / std::min(scale, 1.0));
}

// The source coordinate of output element x, or nullopt outside a tf_crop_and_resize box.
std::optional<double> SourceCoordinate(const ResizeMode& m, double x, int64_t in, int64_t out, double scale,
                                       double roi_start, double roi_end) {
  double out_width = scale * static_cast<double>(in), width = static_cast<double>(in);
  const std::string& c = m.coordinates;
  if (c == "align_corners") return out_width == 1 ? 0.0 : x * (width - 1) / (out_width - 1);
  if (c == "asymmetric") return x / scale;
  if (c == "pytorch_half_pixel") return out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (c == "half_pixel_symmetric") {
    double offset = width / 2 * (1 - static_cast<double>(out) / out_width);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (c == "tf_crop_and_resize") {
    double source = out_width == 1 ? (roi_end - roi_start) * (width - 1) / 2
                                   : x * (roi_end - roi_start) * (width - 1) / (out_width - 1);
    source += roi_start * (width - 1);
    if (source < 0 || source > width - 1) return std::nullopt;
    return source;
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

AxisWeights ComputeAxisWeights(const ResizeMode& m, int64_t in, int64_t out, double scale, double roi_start,
                               double roi_end) {
  AxisWeights w{in, out, std::vector<double>(out * in, 0.0), std::vector<double>(out, 0.0), false};
  std::vector<double> coefficients;
  for (int64_t x = 0; x < out; ++x) {
    std::optional<double> source = SourceCoordinate(m, double(x), in, out, scale, roi_start, roi_end);
    if (!source) {
      w.offsets[x] = m.extrapolation;
      w.has_offsets = w.has_offsets || m.extrapolation != 0;
      continue;
    }
    double ratio = *source == std::floor(*source) ? 1.0 : *source - std::floor(*source);
    Coefficients(m, ratio, scale, coefficients);
    auto n = static_cast<int64_t>(coefficients.size());
    int64_t pad = (n + 1) / 2;  // the reference pads the data with its edge values
    const IndexWindow indexes = NearestIndexes(*source + double(pad), n, in + 2 * pad);
    if (m.exclude_outside) {
      for (int64_t k = 0; k < indexes.count; ++k)
        if (indexes.lo + k - pad < 0 || indexes.lo + k - pad >= in) coefficients[k] = 0;
      Normalize(coefficients);
    }
    for (int64_t k = 0; k < indexes.count; ++k)
      w.weights[x * in + std::clamp<int64_t>(indexes.lo + k - pad, 0, in - 1)] += coefficients[k];
  }
  return w;
}

// The input index each row picks, when every row is one weight of exactly 1.
std::optional<std::vector<double>> PickedIndexes(const AxisWeights& w) {
  if (w.has_offsets) return std::nullopt;
  std::vector<double> picked;
  for (int64_t x = 0; x < w.out; ++x) {
    int64_t nonzero = 0, at = 0;
    for (int64_t j = 0; j < w.in; ++j)
      if (w.weights[x * w.in + j] != 0) ++nonzero, at = j;
    if (nonzero != 1 || w.weights[x * w.in + at] != 1) return std::nullopt;
    picked.push_back(static_cast<double>(at));
  }
  return picked;
}

StatusOr<Value> ApplyAxis(GraphBuilder& b, Value x, int64_t axis, const AxisWeights& w) {
  if (!b.ok()) return b.status();  // the previous axis's product was not built
  if (std::optional<std::vector<double>> picked = PickedIndexes(w))
    return b.Gather(x, b.Constant(Tensor::FromDoubles(DType::kI64, {w.out}, *picked)), axis);
  DType dtype = b.dtype(x);
  if (!IsFloat(dtype))
    return Unimplemented(fmt::format("Resize that interpolates a {} input is not supported", DTypeName(dtype)));
  int64_t rank = b.rank(x);
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  std::vector<int64_t> inverse(rank);
  for (int64_t d = 0; d < rank; ++d) inverse[perm[d]] = d;
  std::vector<double> transposed(w.in * w.out);  // [in, out], the right operand of x · Wᵀ
  for (int64_t i = 0; i < w.out; ++i)
    for (int64_t j = 0; j < w.in; ++j) transposed[j * w.out + i] = w.weights[i * w.in + j];
  bool last = axis == rank - 1;
  Value moved = last ? x : b.Transpose(x, perm);
  Value y = b.MatMul(moved, b.Constant(Tensor::FromDoubles(dtype, {w.in, w.out}, transposed)));
  if (w.has_offsets) y = b.Add(y, b.Constant(Tensor::FromDoubles(dtype, {w.out}, w.offsets)));
  return last ? y : b.Transpose(y, inverse);
}

StatusOr<ResizeMode> ReadMode(NodeContext& ctx) {
  ResizeMode m;
  m.mode = ctx.String("mode", "nearest");
  m.coordinates = ctx.String("coordinate_transformation_mode", "half_pixel");
  m.nearest_mode = ctx.String("nearest_mode", "round_prefer_floor");
  m.cubic_a = ctx.Float("cubic_coeff_a", -0.75);
  m.extrapolation = ctx.Float("extrapolation_value", 0);
  m.antialias = ctx.Int("antialias", 0) != 0;
  m.exclude_outside = ctx.Int("exclude_outside", 0) != 0;
  static const std::set<std::string> kModes = {"nearest", "linear", "cubic"};
  static const std::set<std::string> kCoordinates = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                                     "align_corners", "asymmetric", "tf_crop_and_resize"};
  static const std::set<std::string> kNearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (!kModes.count(m.mode)) return InvalidArgument(fmt::format("unknown mode '{}'", m.mode));
  if (!kCoordinates.count(m.coordinates))
    return InvalidArgument(fmt::format("unknown coordinate_transformation_mode '{}'", m.coordinates));
  if (!kNearest.count(m.nearest_mode)) return InvalidArgument(fmt::format("unknown nearest_mode '{}'", m.nearest_mode));
  if (m.antialias && m.mode == "nearest") return InvalidArgument("antialias does not apply to mode 'nearest'");
  return m;
}

// The resized axes (attribute `axes`, default all), validated.
StatusOr<std::vector<int64_t>> ReadAxes(NodeContext& ctx, int64_t rank) {
  std::vector<int64_t> axes;
  if (!ctx.HasAttr("axes")) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  std::set<int64_t> seen;
  for (int64_t a : ctx.Ints("axes")) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(a, rank, "axis"));
    if (!seen.insert(axis).second) return InvalidArgument(fmt::format("axis {} is listed twice", a));
    axes.push_back(axis);
  }
  return axes;
}

// Per dim: output size and scale, from the scales or the sizes input.
Status OutputSizes(NodeContext& ctx, const Shape& in, const std::vector<int64_t>& axes, Shape& out,
                   std::vector<double>& scales) {
  out = in;
  scales.assign(in.size(), 1.0);
  const Tensor* scale_input = ctx.KnownInput(2);
  bool have_scales = ctx.HasInput(2) && !(scale_input && scale_input->num_elements() == 0);
  if (have_scales) {
    ASSIGN_OR_RETURN(Tensor given, ctx.ConstInput(2, "scales"));
    std::vector<double> s = given.ToDoubles();
    if (s.size() != axes.size())
      return InvalidArgument(fmt::format("scales has {} values for {} axes", s.size(), axes.size()));
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!(s[i] > 0)) return InvalidArgument(fmt::format("scale {} must be positive", s[i]));
      // Checked as a double: converting a size past int64 (an infinite scale) is undefined.
      const double size = s[i] * static_cast<double>(in[axes[i]]);
      if (!(size <= static_cast<double>(kMaxValueElements)))
        return InvalidArgument(fmt::format("scale {} makes axis {} of size {} larger than {} elements", s[i], axes[i], in[axes[i]],
                                           kMaxValueElements));
      scales[axes[i]] = s[i];
      out[axes[i]] = static_cast<int64_t>(size);
    }
    return Status::Ok();
  }
  if (!ctx.HasInput(3)) return InvalidArgument("Resize needs scales or sizes");
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ctx.ConstInts(3, "sizes"));
  if (sizes.size() != axes.size())
    return InvalidArgument(fmt::format("sizes has {} values for {} axes", sizes.size(), axes.size()));
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i] <= 0 || in[axes[i]] == 0) return InvalidArgument(fmt::format("size {} must be positive", sizes[i]));
    out[axes[i]] = sizes[i];
    scales[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]);
  }
  std::string policy = ctx.String("keep_aspect_ratio_policy", "stretch");
  if (policy == "stretch") return Status::Ok();
  if (policy != "not_larger" && policy != "not_smaller")
    return InvalidArgument(fmt::format("unknown keep_aspect_ratio_policy '{}'", policy));
  double scale = scales[axes[0]];
  for (int64_t a : axes) scale = policy == "not_larger" ? std::min(scale, scales[a]) : std::max(scale, scales[a]);
  for (int64_t a : axes) {
    scales[a] = scale;
    out[a] = static_cast<int64_t>(scale * static_cast<double>(in[a]) + 0.5);
  }
  return Status::Ok();
}

Status ImportResize(NodeContext& ctx) {
  if (ctx.opset() < 11) return Unimplemented("Resize before opset 11 is not supported");
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Shape in = b.shape(x);
  ASSIGN_OR_RETURN(ResizeMode mode, ReadMode(ctx));
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadAxes(ctx, b.rank(x)));
  Shape out;
  std::vector<double> scales;
  RETURN_IF_ERROR(OutputSizes(ctx, in, axes, out, scales));
  std::vector<double> roi_start(in.size(), 0.0), roi_end(in.size(), 1.0);
  if (mode.coordinates == "tf_crop_and_resize") {
    ASSIGN_OR_RETURN(Tensor roi_tensor, ctx.ConstInput(1, "roi"));
    std::vector<double> roi = roi_tensor.ToDoubles();
    if (roi.size() != 2 * axes.size())
      return InvalidArgument(fmt::format("roi has {} values for {} axes (needs starts and ends)", roi.size(), axes.size()));
    for (size_t i = 0; i < axes.size(); ++i) roi_start[axes[i]] = roi[i], roi_end[axes[i]] = roi[axes.size() + i];
  }
  for (int64_t d = 0; d < b.rank(x); ++d)
    if (out[d] <= 0) return InvalidArgument(fmt::format("output dim {} would be empty ({})", d, out[d]));
  RETURN_IF_ERROR(CheckShapeSize(out, kMaxValueElements, "the Resize output"));
  Value y = x;
  for (int64_t d = b.rank(x) - 1; d >= 0; --d) {
    bool identity = out[d] == in[d] && scales[d] == 1 && mode.coordinates != "tf_crop_and_resize";
    if (identity) continue;
    // The weights are worked out output by output and tap by tap at import: an upsample of
    // one axis to 8 million elements took 9 s under the fuzzers' sanitizers (0.7 s in a
    // release build), beyond their 10 s a run with the leak check's second run.
    if (out[d] > (int64_t{1} << 22))
      return Unimplemented(fmt::format("Resize of dim {} from {} to {}: more than {} output elements on one axis", d, in[d], out[d],
                                       int64_t{1} << 22));
    // in × out by division: a declared input dim of 2^40 times an output of 2^39 overflowed
    // int64 (UBSan, CI's fuzz slice, 2026-11-29).
    if (in[d] > (int64_t{1} << 26) / out[d])
      return Unimplemented(fmt::format("Resize of dim {} from {} to {} is too large for its weight matrix", d, in[d], out[d]));
    if (const double taps = TapsPerOutput(mode, scales[d]); taps * static_cast<double>(out[d]) > double(int64_t{1} << 24))
      return Unimplemented(fmt::format("Resize of dim {} from {} to {} at scale {} reads {} input elements an output element, {} in all: too many to weigh",
                                       d, in[d], out[d], scales[d], taps, taps * static_cast<double>(out[d])));
    AxisWeights w = ComputeAxisWeights(mode, in[d], out[d], scales[d], roi_start[d], roi_end[d]);
    ASSIGN_OR_RETURN(y, ApplyAxis(b, y, d, w));
  }
  ctx.SetOutput(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterResizeOps(OpRegistry& r) { r.Add("Resize", ImportResize, 1, 4); }

}  // namespace tilefuse::onnx_import
