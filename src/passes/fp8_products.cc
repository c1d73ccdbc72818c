#include "passes/fp8_products.h"

#include <optional>

#include "ir/zeros.h"
#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// `id` without the broadcasts the builder put in front of it for a pointwise op.
int Unbroadcast(const Graph& g, int id) {
  while (g.node(id).op == OpCode::kBroadcast) id = g.node(id).inputs[0];
  return id;
}

struct Dequantized {
  int quantized = -1;  // the 8-bit float value
  int scale = -1;      // what it is multiplied by, before the broadcast (f32)
};

// `id` as [cast](cast(q) · s), the outer cast to the product's type absent for an f32 one.
std::optional<Dequantized> MatchDequantized(const Graph& g, int id) {
  const Node* n = &g.node(id);
  if (n->op == OpCode::kCast) n = &g.node(n->inputs[0]);
  if (n->op != OpCode::kMul || n->dtype != DType::kF32) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Node* value = &g.node(n->inputs[side]);
    if (value->op == OpCode::kSub) {
      if (!IsZeros(g, value->inputs[1])) continue;
      value = &g.node(value->inputs[0]);
    }
    if (value->op != OpCode::kCast) continue;
    const Node& q = g.node(value->inputs[0]);
    // Hopper's tensor cores take e4m3 and e5m2; the FNUZ forms compute as written.
    if (IsFloat8(q.dtype) && !IsFloat8Fnuz(q.dtype)) return Dequantized{q.id, Unbroadcast(g, n->inputs[1 - side])};
  }
  return std::nullopt;
}

// Whether a scale of shape `scale`, broadcast against `operand` (right-aligned), has one
// value along the operand's dim `dim`.
bool ConstantAlong(const Shape& scale, const Shape& operand, size_t dim) {
  if (scale.size() > operand.size()) return false;
  const size_t missing = operand.size() - scale.size();
  return dim < missing || scale[dim - missing] == 1;
}

struct Fp8Product {
  Dequantized a, b;
  bool b_transposed = false;  // B is the transpose of the dequantized [N][K] value
};

std::optional<Fp8Product> MatchFp8Product(const Graph& g, const Node& product) {
  const Node &a = g.node(product.inputs[0]), &b = g.node(product.inputs[1]);
  // B shared by every batch entry, and K rows of whole 16-byte units (TMA's row strides).
  if (a.rank() < 2 || b.rank() != 2 || a.shape.back() % 16 != 0) return std::nullopt;
  Fp8Product p;
  int b_value = b.id;
  if (b.op == OpCode::kTranspose && b.attrs.perm == std::vector<int64_t>{1, 0}) {
    p.b_transposed = true;
    b_value = b.inputs[0];
  }
  std::optional<Dequantized> da = MatchDequantized(g, a.id), db = MatchDequantized(g, b_value);
  if (!da || !db) return std::nullopt;
  const Node &qa = g.node(da->quantized), &qb = g.node(db->quantized);
  // One tensor-core type a kernel; B K-major: wᵀ read from w, or a constant stored so.
  if (qa.dtype != qb.dtype || (!p.b_transposed && qb.op != OpCode::kConstant)) return std::nullopt;
  if (!ConstantAlong(g.node(da->scale).shape, qa.shape, qa.rank() - 1) ||
      !ConstantAlong(g.node(db->scale).shape, qb.shape, p.b_transposed ? 1 : 0))
    return std::nullopt;
  p.a = *da;
  p.b = *db;
  return p;
}

}  // namespace

StatusOr<Graph> MakeFp8Products(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    const std::optional<Fp8Product> p = node.op == OpCode::kMatMul ? MatchFp8Product(graph, node) : std::nullopt;
    if (!p) {
      rewriter.CopyNode(node);
      continue;
    }
    GraphBuilder& b = rewriter.builder();
    rewriter.SetLocation(node);
    Value qb = rewriter.Map(p->b.quantized), scale_b = rewriter.Map(p->b.scale);
    if (p->b_transposed) {
      qb = b.Transpose(qb, {1, 0});
      if (b.rank(scale_b) == 2) scale_b = b.Transpose(scale_b, {1, 0});
    }
    Value product = b.MatMul(rewriter.Map(p->a.quantized), qb);  // f32
    Value scaled = b.Mul(b.Mul(product, rewriter.Map(p->a.scale)), scale_b);
    rewriter.SetMap(node.id, b.Cast(scaled, node.dtype));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
