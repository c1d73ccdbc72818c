#include "codegen/gemm_row_norms.h"

#include <fmt/format.h>

#include "tilefuse/tensor.h"

namespace tilefuse {

namespace {

// Walks an RMS norm's (Match) or a layer norm's (MatchLayer) expression from its output down to
// x, the scale, the bias and epsilon, checking the ops it passes (each must be a member of the
// norm's group).
class NormWalk {
 public:
  NormWalk(const Graph& g, const std::vector<bool>& member) : g_(g), member_(member) {}

  std::optional<RmsNormMatch> Match(int value) {
    const Node& out = g_.node(value);
    if (out.op != OpCode::kMul || !Member(value)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      RmsNormMatch m;
      m.scale = ThroughShape(out.inputs[side]);
      if (!Normalized(out.inputs[1 - side], m)) continue;
      const Node& x = g_.node(m.input);
      const Node& scale = g_.node(m.scale);
      if (!IsHalf(x.dtype) || scale.dtype != x.dtype || member_[m.input] || member_[m.scale] || x.rank() < 2 ||
          NumElements(scale.shape) != x.shape.back())
        continue;
      return m;
    }
    return std::nullopt;
  }

 private:
  // x · rsqrt(mean(x²) + epsilon), or x / sqrt(...), up to casts: sets input and epsilon.
  bool Normalized(int id, RmsNormMatch& m) {
    const Node& n = g_.node(ThroughCasts(id));
    if (!Member(n.id)) return false;
    if (n.op == OpCode::kDiv) {
      m.input = ThroughCasts(n.inputs[0]);
      return Root(ThroughShape(n.inputs[1]), /*reciprocal=*/false, m);
    }
    if (n.op != OpCode::kMul) return false;
    for (int side = 0; side < 2; ++side) {
      m.input = ThroughCasts(n.inputs[side]);
      if (Root(ThroughShape(n.inputs[1 - side]), /*reciprocal=*/true, m)) return true;
    }
    return false;
  }
  // rsqrt(mean(x²) + epsilon) (reciprocal) or sqrt(...), up to casts.
  bool Root(int id, bool reciprocal, RmsNormMatch& m) {
    const Node* n = &g_.node(ThroughCasts(id));
    if (reciprocal && n->op == OpCode::kReciprocal && Member(n->id)) {
      n = &g_.node(ThroughCasts(n->inputs[0]));
      reciprocal = false;
    }
    if (n->op != (reciprocal ? OpCode::kRsqrt : OpCode::kSqrt) || !Member(n->id)) return false;
    const Node& sum = g_.node(ThroughCasts(n->inputs[0]));
    if (sum.op != OpCode::kAdd || !Member(sum.id)) return false;
    for (int side = 0; side < 2; ++side) {
      const std::optional<double> epsilon = ScalarConstant(sum.inputs[1 - side]);
      if (epsilon && *epsilon >= 0 && MeanSquare(ThroughCasts(sum.inputs[side]), m.input)) {
        m.epsilon = *epsilon;
        return true;
      }
    }
    return false;
  }
  // mean(x², over the last axis), the square as x · x or pow(x, 2), up to casts.
  bool MeanSquare(int id, int x) {
    const Node& mean = g_.node(id);
    if (mean.op != OpCode::kReduceMean || !Member(id)) return false;
    const Node& square = g_.node(ThroughCasts(mean.inputs[0]));
    if (mean.attrs.axes != std::vector<int64_t>{square.rank() - 1} || !Member(square.id)) return false;
    if (square.op == OpCode::kMul) return ThroughCasts(square.inputs[0]) == x && ThroughCasts(square.inputs[1]) == x;
    if (square.op == OpCode::kPow) return ThroughCasts(square.inputs[0]) == x && ScalarConstant(square.inputs[1]) == 2.0;
    return false;
  }

 public:
  std::optional<LayerNormMatch> MatchLayer(int value) {
    const Node& out = g_.node(ThroughShape(value));
    if (out.op != OpCode::kCast || !Member(out.id) || !IsHalf(out.dtype)) return std::nullopt;
    LayerNormMatch m;
    int scaled = out.inputs[0];
    if (const Node& add = g_.node(scaled); add.op == OpCode::kAdd && Member(add.id)) {  // + bias
      for (int side = 0; side < 2 && m.bias < 0; ++side)
        if (const int bias = Parameter(add.inputs[side], out.dtype); bias >= 0 && g_.node(add.inputs[1 - side]).op == OpCode::kMul) {
          m.bias = bias;
          scaled = add.inputs[1 - side];
        }
      if (m.bias < 0) return std::nullopt;
    }
    const Node& times_scale = g_.node(scaled);
    if (times_scale.op != OpCode::kMul || !Member(times_scale.id)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      m.scale = Parameter(times_scale.inputs[side], out.dtype);
      if (m.scale >= 0 && Standardized(times_scale.inputs[1 - side], m)) break;
      m.scale = -1;
    }
    if (m.scale < 0) return std::nullopt;
    const Node& x = g_.node(m.input);
    if (x.dtype != out.dtype || member_[m.input] || x.rank() < 1 || NumElements(g_.node(m.scale).shape) != x.shape.back() ||
        (m.bias >= 0 && NumElements(g_.node(m.bias).shape) != x.shape.back()))
      return std::nullopt;
    return m;
  }

 private:
  // A [K] vector of `dtype`, not computed by the norm, cast to f32 and broadcast: its node.
  int Parameter(int id, DType dtype) const {
    const Node& cast = g_.node(ThroughShape(id));
    if (cast.op != OpCode::kCast || cast.dtype != DType::kF32 || !Member(cast.id)) return -1;
    const int v = ThroughShape(cast.inputs[0]);
    return g_.node(v).dtype == dtype && !Member(v) ? v : -1;
  }
  // (xf - mean(xf)) · rsqrt(mean((xf - mean(xf))²) + epsilon): sets input and epsilon.
  bool Standardized(int id, LayerNormMatch& m) {
    const Node& n = g_.node(id);
    if (n.op != OpCode::kMul || !Member(n.id)) return false;
    for (int side = 0; side < 2; ++side) {
      const int centered = n.inputs[side];
      if (!Centered(centered, m)) continue;
      const Node& root = g_.node(ThroughShape(n.inputs[1 - side]));
      if (root.op != OpCode::kRsqrt || !Member(root.id)) continue;
      const Node& sum = g_.node(root.inputs[0]);
      if (sum.op != OpCode::kAdd || !Member(sum.id)) continue;
      for (int s2 = 0; s2 < 2; ++s2) {
        const std::optional<double> epsilon = ScalarConstant(sum.inputs[1 - s2]);
        const Node& variance = g_.node(sum.inputs[s2]);
        if (!epsilon || *epsilon < 0 || variance.op != OpCode::kReduceMean || !Member(variance.id) || !LastAxis(variance)) continue;
        const Node& square = g_.node(variance.inputs[0]);
        if (square.op == OpCode::kMul && Member(square.id) && square.inputs[0] == centered && square.inputs[1] == centered) {
          m.epsilon = *epsilon;
          return true;
        }
      }
    }
    return false;
  }
  // xf - mean(xf), xf = cast(x, f32) (x a 16-bit value): sets input.
  bool Centered(int id, LayerNormMatch& m) {
    const Node& n = g_.node(id);
    if (n.op != OpCode::kSub || !Member(n.id)) return false;
    const Node& xf = g_.node(n.inputs[0]);
    const Node& mean = g_.node(ThroughShape(n.inputs[1]));
    if (xf.op != OpCode::kCast || xf.dtype != DType::kF32 || !Member(xf.id) || !IsHalf(g_.node(xf.inputs[0]).dtype)) return false;
    if (mean.op != OpCode::kReduceMean || !Member(mean.id) || !LastAxis(mean) || mean.inputs[0] != xf.id) return false;
    m.input = xf.inputs[0];
    return true;
  }
  bool LastAxis(const Node& reduce) const {
    const Node& in = g_.node(reduce.inputs[0]);
    return reduce.attrs.axes == std::vector<int64_t>{in.rank() - 1};
  }

  bool Member(int id) const { return id >= 0 && id < static_cast<int>(member_.size()) && member_[id]; }
  bool FloatCast(const Node& n) const { return n.op == OpCode::kCast && IsFloat(n.dtype) && IsFloat(g_.node(n.inputs[0]).dtype); }
  // Through the norm's own casts only: a cast of x computed by x's producer (a LLaMA model's
  // last residual sum written as f32 for its final norm) leaves x in no memory the product
  // could read (the final norm's fold read an unwritten buffer: wrong logits on an H100).
  int ThroughCasts(int id) const {
    while (FloatCast(g_.node(id)) && Member(id)) id = g_.node(id).inputs[0];
    return id;
  }
  int ThroughShape(int id) const {
    for (const Node* n = &g_.node(id); n->op == OpCode::kReshape || n->op == OpCode::kBroadcast; n = &g_.node(id)) id = n->inputs[0];
    return id;
  }
  // A constant of one value, through reshapes, broadcasts and casts.
  std::optional<double> ScalarConstant(int id) const {
    for (const Node* n = &g_.node(id); n->op == OpCode::kReshape || n->op == OpCode::kBroadcast || FloatCast(*n); n = &g_.node(id))
      id = n->inputs[0];
    const Node& n = g_.node(id);
    if (n.op != OpCode::kConstant || !n.attrs.value || n.attrs.value->num_elements() < 1) return std::nullopt;
    const double v = n.attrs.value->GetDouble(0);
    for (int64_t i = 1; i < n.attrs.value->num_elements(); ++i)
      if (n.attrs.value->GetDouble(i) != v) return std::nullopt;
    return v;
  }

  const Graph& g_;
  const std::vector<bool>& member_;
};

}  // namespace

std::optional<RmsNormMatch> MatchRmsNorm(const Graph& graph, int value, const std::vector<bool>& member) {
  return NormWalk(graph, member).Match(value);
}

std::optional<LayerNormMatch> MatchLayerNorm(const Graph& graph, int value, const std::vector<bool>& member) {
  return NormWalk(graph, member).MatchLayer(value);
}

Status RowNormFits(const GemmTemplateKernel& g) {
  if (g.batch != 1) return InvalidArgument(fmt::format("{} batch entries (one)", g.batch));
  if (g.a_view || g.a_conv || g.a_mn_major >= 0) return InvalidArgument("A is read through a view, as im2col or MN-major");
  if (!IsHalf(g.operand_dtype)) return InvalidArgument(fmt::format("{} operands (bf16 or f16)", DTypeName(g.operand_dtype)));
  if (g.k % 64 != 0) return InvalidArgument(fmt::format("K = {} is not a whole number of 64-column steps", g.k));
  return Status::Ok();
}

Status RowNormFoldable(const GemmTemplateKernel& g) {
  if (g.row_norm) return InvalidArgument("A is normed already");
  return RowNormFits(g);
}

GemmTemplateKernel FoldRowNorm(GemmTemplateKernel g, int normed, const RmsNormMatch& norm) {
  const GemmRowNorm row_norm{normed, norm.scale, static_cast<float>(norm.epsilon)};
  g.a = norm.input;
  g.row_norm = row_norm;
  for (GemmTemplateKernel& part : g.n_parts) part.a = norm.input, part.row_norm = row_norm;
  for (GemmTemplateKernel& gate : g.gate) gate.a = norm.input, gate.row_norm = row_norm;
  return g;
}

}  // namespace tilefuse
