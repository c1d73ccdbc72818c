#include "passes/stage_conv_inputs.h"

#include <algorithm>
#include <map>
#include <utility>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// Channels of an NCHW value whose windows' im2col reads a padded NHWC copy (an image's 3; 4 with alpha).
constexpr int64_t kFewChannels = 4;

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2}, kColumns = {0, 2, 3, 4, 5, 1};

bool IsTranspose(const Node& n, const std::vector<int64_t>& perm) { return n.op == OpCode::kTranspose && n.attrs.perm == perm; }

// A window of the channels-last convolution's form (passes/window_ops.h) over an NCHW value
// the implicit GEMM could read once it is NHWC.
bool ReadsNchwForImplicitGemm(const Graph& g, const std::vector<std::vector<int>>& users, const Node& window) {
  if (window.op != OpCode::kWindow || window.attrs.kernel.size() != 2) return false;
  const Node& x = g.node(window.inputs[0]);
  if (IsTranspose(x, kToNchw) || x.rank() != 4 || x.shape[1] % 64 != 0) return false;
  if (x.dtype != DType::kBF16 && x.dtype != DType::kF16) return false;
  const std::vector<int>& readers = users[window.id];
  return readers.size() == 1 && IsTranspose(g.node(readers[0]), kColumns);
}

// A window of the channels-last form over an NCHW value of a few channels (an RGB image: ResNet's
// stem), whose im2col a prologue copies. Gathered from NCHW, each element of a column row
// found its channel H·W elements from its neighbours and tested the padding: the prologue
// was 311 µs of ResNet-50 bf16's 1341 at batch 32 (H200, 2026-12-07).
bool ReadsFewChannelNchwForIm2col(const Graph& g, const std::vector<std::vector<int>>& users, const Node& window) {
  if (window.op != OpCode::kWindow || window.attrs.kernel.size() != 2) return false;
  const Node& x = g.node(window.inputs[0]);
  if (IsTranspose(x, kToNchw) || x.rank() != 4 || x.shape[1] > kFewChannels) return false;
  if (!IsFloat(x.dtype) || IsFloat8(x.dtype)) return false;
  // Only windows that overlap or pad, whose im2col is many times x (the stem's 7x7 stride 2:
  // 12x); a patch embedding's (16x16 stride 16, ViT) is x once, read in runs of 16 already.
  const Attrs& a = window.attrs;
  const bool overlaps = a.kernel[0] > a.strides[0] || a.kernel[1] > a.strides[1];
  const bool pads = std::any_of(a.pads.begin(), a.pads.end(), [](int64_t p) { return p != 0; });
  if (!overlaps && !pads) return false;
  const std::vector<int>& readers = users[window.id];
  return readers.size() == 1 && IsTranspose(g.node(readers[0]), kColumns);
}

// `x` NCHW with the window's zero padding made part of it: a window of one element (kernel 1)
// with those pads, then NHWC. The convolution's window then reads it unpadded, where each row
// of its im2col is kernel-height runs of kernel-width · channels contiguous elements and no
// element tests a bound.
Value PaddedNhwc(GraphBuilder& b, Value x, Value fill, const Attrs& window) {
  const Shape s = b.shape(x);
  const std::vector<int64_t>& pads = window.pads;  // top, left, bottom, right
  Value padded = b.Window(x, fill, PoolParams{.kernel = {1, 1}, .strides = {1, 1}, .pads = pads, .dilations = {1, 1}});
  padded = b.Reshape(padded, {s[0], s[1], s[2] + pads[0] + pads[2], s[3] + pads[1] + pads[3]});
  return b.Transpose(padded, kToNhwc);
}

}  // namespace

StatusOr<Graph> StageConvInputs(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  GraphRewriter rewriter(graph);
  std::vector<Value> staged(graph.num_nodes());  // one NHWC copy per value, however many windows read it
  std::map<std::pair<int, std::vector<int64_t>>, Value> padded;  // per value and pads: one padded NHWC copy
  for (const Node& node : graph.nodes()) {
    const bool implicit_gemm = ReadsNchwForImplicitGemm(graph, users, node);
    if (!implicit_gemm && !ReadsFewChannelNchwForIm2col(graph, users, node)) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(node);
    GraphBuilder& b = rewriter.builder();
    Attrs attrs = node.attrs;
    if (implicit_gemm) {
      Value& copy = staged[node.inputs[0]];
      if (!copy.valid()) copy = b.Transpose(inputs[0], kToNhwc);
      inputs[0] = b.Transpose(copy, kToNchw);
    } else {
      Value& copy = padded[{node.inputs[0], attrs.pads}];  // (the fill is the convolution's zero)
      if (!copy.valid()) copy = PaddedNhwc(b, inputs[0], inputs[1], attrs);
      inputs[0] = b.Transpose(copy, kToNchw);
      std::fill(attrs.pads.begin(), attrs.pads.end(), 0);
    }
    rewriter.SetMap(node.id, b.AddNode(OpCode::kWindow, std::move(inputs), std::move(attrs)));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
