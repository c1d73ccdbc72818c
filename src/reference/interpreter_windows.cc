// Sliding-window ops of the reference interpreter, NCHW with any number (>= 1) of
// spatial dims: conv (groups, strides, dilations, pads, optional bias), max pool,
// average pool, and the window view (im2col) the compiler rewrites them into. Positions in the padding are skipped rather than read, which gives
// conv its zero padding and max pool its -inf padding.
#include <limits>

#include "reference/interpreter_kernels.h"
#include "ir/scalar_library.h"
#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// The geometry shared by every window op: input and output spatial sizes and, for
// each kernel position, its offset (in input elements) and per-dim displacement.
struct Window {
  Shape in_spatial, out_spatial, kernel;
  std::vector<int64_t> strides, dilations, pads_begin, pads_end;
  std::vector<int64_t> in_strides;  // row-major strides of in_spatial

  int spatial() const { return static_cast<int>(kernel.size()); }
  int64_t in_size() const { return NumElements(in_spatial); }
  int64_t out_size() const { return NumElements(out_spatial); }
};

Window MakeWindow(const Node& node, const Operand& x) {
  Window w;
  const Attrs& a = node.attrs;
  int spatial = static_cast<int>(a.kernel.size());
  w.in_spatial.assign(x.shape->begin() + 2, x.shape->end());
  w.out_spatial.assign(node.shape.begin() + 2, node.shape.begin() + 2 + spatial);
  w.kernel = a.kernel;
  w.strides = a.strides;
  w.dilations = a.dilations;
  w.pads_begin.assign(a.pads.begin(), a.pads.begin() + spatial);
  w.pads_end.assign(a.pads.begin() + spatial, a.pads.end());
  w.in_strides = RowMajorStrides(w.in_spatial);
  return w;
}

// Calls fn(out_flat, kernel_flat, in_offset) for every output position and every
// kernel position whose input lies inside the (unpadded) input, and
// done(out_flat, in_window_count) after each output position, where
// in_window_count counts the kernel positions inside the padded input.
template <typename Visit, typename Done>
void ForEachWindowTap(const Window& w, Visit visit, Done done) {
  if (w.out_size() == 0 || NumElements(w.kernel) == 0) return;
  int spatial = w.spatial();
  std::vector<int64_t> out_index(spatial, 0), kernel_index(spatial, 0), corner(spatial);
  int64_t out_flat = 0;
  do {
    for (int d = 0; d < spatial; ++d) corner[d] = out_index[d] * w.strides[d] - w.pads_begin[d];
    std::fill(kernel_index.begin(), kernel_index.end(), 0);
    int64_t kernel_flat = 0, padded_count = 0;
    do {
      bool inside = true, inside_padded = true;
      int64_t offset = 0;
      for (int d = 0; d < spatial; ++d) {
        int64_t pos = corner[d] + kernel_index[d] * w.dilations[d];
        inside = inside && pos >= 0 && pos < w.in_spatial[d];
        inside_padded = inside_padded && pos >= -w.pads_begin[d] && pos < w.in_spatial[d] + w.pads_end[d];
        offset += pos * w.in_strides[d];
      }
      padded_count += inside_padded;
      if (inside) visit(out_flat, kernel_flat, offset);
      ++kernel_flat;
    } while (NextIndex(kernel_index, w.kernel));
    done(out_flat, padded_count);
    ++out_flat;
  } while (NextIndex(out_index, w.out_spatial));
}

void Conv(const Node& node, const std::vector<Operand>& in, Values& out) {
  const Operand& x = in[0];
  const Operand& weight = in[1];
  Window w = MakeWindow(node, x);
  int64_t batch = x.dim(0), in_channels = x.dim(1), out_channels = weight.dim(0);
  int64_t group = node.attrs.group;
  int64_t in_per_group = in_channels / group, out_per_group = out_channels / group;
  int64_t kernel_size = NumElements(w.kernel);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < out_channels; ++oc) {
      double* dst = out.data() + (n * out_channels + oc) * w.out_size();
      double bias = in.size() > 2 ? in[2].data()[oc] : 0.0;
      std::fill(dst, dst + w.out_size(), bias);
      int64_t first_ic = (oc / out_per_group) * in_per_group;
      for (int64_t icg = 0; icg < in_per_group; ++icg) {
        const double* src = x.data() + (n * in_channels + first_ic + icg) * w.in_size();
        const double* taps = weight.data() + (oc * in_per_group + icg) * kernel_size;
        ForEachWindowTap(
            w, [&](int64_t o, int64_t k, int64_t offset) { dst[o] += src[offset] * taps[k]; },
            [](int64_t, int64_t) {});
      }
    }
  }
}

void Pool(const Node& node, const Operand& x, Values& out) {
  Window w = MakeWindow(node, x);
  bool is_max = node.op == OpCode::kMaxPool;
  int64_t planes = x.dim(0) * x.dim(1);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const double* src = x.data() + plane * w.in_size();
    double* dst = out.data() + plane * w.out_size();
    std::vector<int64_t> inside_count(w.out_size(), 0);
    std::fill(dst, dst + w.out_size(), is_max ? -std::numeric_limits<double>::infinity() : 0.0);
    ForEachWindowTap(
        w,
        [&](int64_t o, int64_t, int64_t offset) {
          dst[o] = is_max ? scalar::max_nan(dst[o], src[offset]) : dst[o] + src[offset];
          ++inside_count[o];
        },
        [&](int64_t o, int64_t padded_count) {
          if (is_max) return;
          // ONNX: the divisor counts padded positions only with count_include_pad.
          int64_t divisor = node.attrs.count_include_pad ? padded_count : inside_count[o];
          dst[o] /= static_cast<double>(divisor);
        });
  }
}

// out[n, c, o..., k...] = x[n, c, o*stride + k*dilation - pad], the fill outside x.
void SlidingWindow(const Node& node, const Operand& x, double fill, Values& out) {
  Window w = MakeWindow(node, x);
  int64_t planes = x.dim(0) * x.dim(1), kernel_size = NumElements(w.kernel);
  std::fill(out.begin(), out.end(), fill);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const double* src = x.data() + plane * w.in_size();
    double* dst = out.data() + plane * w.out_size() * kernel_size;
    ForEachWindowTap(
        w, [&](int64_t o, int64_t k, int64_t offset) { dst[o * kernel_size + k] = src[offset]; }, [](int64_t, int64_t) {});
  }
}

}  // namespace

Status ComputeWindow(const Node& node, const std::vector<Operand>& in, Values& out) {
  TF_CHECK(!node.attrs.kernel.empty());
  switch (node.op) {
    case OpCode::kConv: Conv(node, in, out); break;
    case OpCode::kMaxPool:
    case OpCode::kAveragePool: Pool(node, in[0], out); break;
    case OpCode::kWindow: SlidingWindow(node, in[0], in[1].data()[0], out); break;
    default: TF_UNREACHABLE("not a window op");
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
