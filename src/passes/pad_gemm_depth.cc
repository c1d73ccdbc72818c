#include "passes/pad_gemm_depth.h"

#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "passes/derived_constants.h"
#include "passes/rewriter.h"
#include "passes/softmax_reads.h"

namespace tilefuse {

namespace {

constexpr int64_t kAlignmentBytes = 16;

// `extent` elements of `dtype` rounded up to whole 16-byte units, or 0 where they already are.
int64_t AlignedExtent(int64_t extent, DType dtype) {
  const int64_t element = static_cast<int64_t>(DTypeSize(dtype));
  if ((extent * element) % kAlignmentBytes == 0 || kAlignmentBytes % element != 0) return 0;
  const int64_t per_row = kAlignmentBytes / element;
  return (extent + per_row - 1) / per_row * per_row;
}

bool LargeEnough(const Node& mm, int64_t k) { return NumElements(mm.shape) * k >= kMinPaddedDepthMacs; }

// Whether `a` is a convolution's im2col (a window's taps transposed and reshaped into rows),
// which a kernel of its own gathers anyway (the product's prologue): its zero columns cost
// that kernel a few more bytes a row, not a copy, so such a product is padded whatever its
// size. A stem of 3 input channels (K = 27 or 147) otherwise ran on cuBLASLt with its batch
// norm and activation as another kernel at batch 1 (ResNet-18/50, MobileNetV3).
bool IsIm2col(const Graph& g, const Node& a) {
  if (a.op != OpCode::kReshape) return false;
  const Node* x = &g.node(a.inputs[0]);
  while (x->op == OpCode::kTranspose || x->op == OpCode::kReshape) x = &g.node(x->inputs[0]);
  return x->op == OpCode::kWindow;
}

// The K that product `mm` is padded to, or 0 where it stays as it is.
int64_t PaddedDepth(const Graph& g, const Node& mm) {
  const Node &a = g.node(mm.inputs[0]), &b = g.node(mm.inputs[1]);
  if (a.rank() < 2 || b.rank() < 2) return 0;  // a matrix-vector product: no tiles to feed
  const int64_t k = a.shape.back();
  return LargeEnough(mm, k) || (IsIm2col(g, a) && b.op == OpCode::kConstant) ? AlignedExtent(k, a.dtype) : 0;
}

// Where `a` is a transpose of its last two dims (an MN-major left operand: a weight gradient's
// dyᵀ) whose source rows are not 16-byte aligned, the M the source's rows are padded to; else 0.
int64_t PaddedTransposedRows(const Graph& g, const Node& mm) {
  const Node& a = g.node(mm.inputs[0]);
  if (a.op != OpCode::kTranspose || a.rank() < 2) return 0;
  const int r = a.rank();
  for (int d = 0; d < r - 2; ++d)
    if (a.attrs.perm[d] != d) return 0;
  if (a.attrs.perm[r - 2] != r - 1 || a.attrs.perm[r - 1] != r - 2) return 0;
  return LargeEnough(mm, a.shape.back()) ? AlignedExtent(a.shape[r - 2], a.dtype) : 0;
}

// `w` [K][N] with zero rows after K up to `rows`.
Tensor PadRows(const Tensor& w, int64_t rows) {
  Tensor out(w.dtype(), {rows, w.shape()[1]});  // zero-filled
  std::memcpy(out.data(), w.data(), static_cast<size_t>(NumElements(w.shape())) * DTypeSize(w.dtype()));
  return out;
}

// Zero-padded copies of values, each made once: a weight gradient's dyᵀ·x and the input
// gradient's dy·W pad the same dy (GPT-2's 412 MB logits gradient), so one copy feeds both.
class Padder {
 public:
  explicit Padder(GraphRewriter& rewriter) : rewriter_(rewriter) {}

  // `x` (of the input graph) with zeros appended along `axis` up to `extent`. A 2-D constant
  // padded along its rows is a constant itself: a weight [K][N] (ResNet's stem, K = 3·7·7)
  // stays a constant that passes/k_major_weights.h then stores K-major, as TF32 tensor cores
  // read it (a concat would be B computed [K][N], which sent the stem's TF32 product to cuBLASLt).
  Value Pad(const Node& x, int axis, int64_t extent) {
    const auto key = std::make_tuple(x.id, axis, extent);
    if (auto it = padded_.find(key); it != padded_.end()) return it->second;
    GraphBuilder& b = rewriter_.builder();
    if (x.op == OpCode::kConstant && x.attrs.value && x.rank() == 2 && axis == 0) {
      const Tensor& w = *x.attrs.value;
      return padded_[key] = b.Constant(DerivedConstant(w, "pad rows to " + std::to_string(extent), [&] { return PadRows(w, extent); }));
    }
    Value value = rewriter_.Map(x.id);
    Shape zeros_shape = b.shape(value);
    zeros_shape[axis] = extent - zeros_shape[axis];
    Value zeros = b.BroadcastTo(b.Scalar(0.0, b.dtype(value)), zeros_shape);
    return padded_[key] = b.Concat({value, zeros}, axis);
  }

 private:
  GraphRewriter& rewriter_;
  std::map<std::tuple<int, int, int64_t>, Value> padded_;
};

}  // namespace

StatusOr<Graph> PadGemmDepth(const Graph& graph) {
  GraphRewriter rewriter(graph);
  Padder padder(rewriter);
  for (const Node& node : graph.nodes()) {
    // Attention's P·V stays as it is: the attention template takes any number of keys, and a
    // padded P (a concat between the softmax and the product) is no attention the matcher
    // finds (BERT at 777 tokens ran its scores through memory, 1.9x the time at 768).
    if (node.op != OpCode::kMatMul || ReadsSoftmax(graph, node.inputs[0])) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node &a = graph.node(node.inputs[0]), &b = graph.node(node.inputs[1]);
    GraphBuilder& builder = rewriter.builder();
    if (const int64_t depth = PaddedDepth(graph, node); depth != 0) {
      rewriter.SetLocation(node);
      Value wide_a = padder.Pad(a, a.rank() - 1, depth);
      Value wide_b = padder.Pad(b, b.rank() - 2, depth);
      rewriter.SetMap(node.id, builder.MatMul(wide_a, wide_b, node.attrs.tf32));
    } else if (const int64_t rows = PaddedTransposedRows(graph, node); rows != 0) {
      // aᵀ's source padded along its rows: the product gets rows - M zero rows, sliced off
      // (a prefix of a row-major result, which its readers take as a view).
      const Node& source = graph.node(a.inputs[0]);
      rewriter.SetLocation(node);
      Value wide_a = builder.Transpose(padder.Pad(source, source.rank() - 1, rows), a.attrs.perm);
      Value product = builder.MatMul(wide_a, rewriter.Map(b.id), node.attrs.tf32);
      const int64_t row_axis = node.rank() - 2;
      rewriter.SetMap(node.id, builder.Slice(product, {0}, {node.shape[row_axis]}, {row_axis}, {1}));
    } else {
      rewriter.CopyNode(node);
    }
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
