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
  int quantized = -1;  // the 8-bit value
  int scale = -1;      // what it is multiplied by, before the broadcast (f32)
  int zero = -1;       // an int8 or uint8 zero point that is not all zeros (f32), before the broadcast; -1: none
};

// `value` past a subtracted zero point, if any: `*zero` the zero point (before its broadcast)
// where it is not all zeros, else -1.
const Node* PastZeroPoint(const Graph& g, const Node* value, int* zero) {
  *zero = -1;
  if (value->op != OpCode::kSub) return value;
  if (!IsZeros(g, value->inputs[1])) *zero = Unbroadcast(g, value->inputs[1]);
  return &g.node(value->inputs[0]);
}

// `id` as [cast]((cast(q) [- z]) · s), the outer cast to the product's type absent for an f32
// one; q of int8 or uint8 only with `int8`, z other than zeros only for those.
std::optional<Dequantized> MatchDequantized(const Graph& g, int id, bool int8) {
  const Node* n = &g.node(id);
  if (n->op == OpCode::kCast) n = &g.node(n->inputs[0]);
  if (n->op != OpCode::kMul || n->dtype != DType::kF32) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    int zero = -1;
    const Node* value = PastZeroPoint(g, &g.node(n->inputs[side]), &zero);
    if (value->op != OpCode::kCast) continue;
    const Node& q = g.node(value->inputs[0]);
    const Dequantized found{q.id, Unbroadcast(g, n->inputs[1 - side]), zero};
    // Hopper's tensor cores take e4m3, e5m2 and int8; the FNUZ forms compute as written.
    if (IsFloat8(q.dtype) && !IsFloat8Fnuz(q.dtype) && zero < 0) return found;
    if (int8 && (q.dtype == DType::kI8 || q.dtype == DType::kU8)) return found;
  }
  return std::nullopt;
}

// An operand of MatMulInteger as the importer writes it (frontend/onnx/matmul.cc):
// cast(q, f64) [- z], q int8 or uint8, no scale.
std::optional<Dequantized> MatchIntegerOperand(const Graph& g, int id) {
  int zero = -1;
  const Node* value = PastZeroPoint(g, &g.node(id), &zero);
  if (value->op != OpCode::kCast || value->dtype != DType::kF64) return std::nullopt;
  const Node& q = g.node(value->inputs[0]);
  if (q.dtype != DType::kI8 && q.dtype != DType::kU8) return std::nullopt;
  return Dequantized{q.id, -1, zero};
}

// Whether a product of these operands is int8's: int8 or uint8 A (a zero point or none) and
// symmetric int8 B.
bool Int8Operands(const Graph& g, const Dequantized& a, const Dequantized& b) {
  const DType qa = g.node(a.quantized).dtype, qb = g.node(b.quantized).dtype;
  return (qa == DType::kI8 || qa == DType::kU8) && qb == DType::kI8 && b.zero < 0;
}

// Whether a scale of shape `scale`, broadcast against `operand` (right-aligned), has one
// value along the operand's dim `dim`.
bool ConstantAlong(const Shape& scale, const Shape& operand, size_t dim) {
  if (scale.size() > operand.size()) return false;
  const size_t missing = operand.size() - scale.size();
  return dim < missing || scale[dim - missing] == 1;
}

// A blocked scale as the importer writes it (frontend/onnx/quantize.cc, RepeatedBlocks): a
// value with `blocks` entries along `axis` of `operand`, each repeated operand[axis] / blocks
// times: reshape(broadcast(reshape(v, v with 1 after axis), v with the block after axis),
// operand), perhaps cast to f32. Its value v, or -1.
int BlockedScale(const Graph& g, int scale, const Shape& operand, size_t axis, int64_t* blocks) {
  if (g.node(scale).op == OpCode::kCast) scale = g.node(scale).inputs[0];  // a 16-bit scale made f32
  const Node& whole = g.node(scale);
  if (whole.op != OpCode::kReshape || whole.shape != operand) return -1;
  const Node& repeated = g.node(whole.inputs[0]);
  if (repeated.op != OpCode::kBroadcast) return -1;
  const Node& split = g.node(repeated.inputs[0]);
  if (split.op != OpCode::kReshape) return -1;
  const Node& v = g.node(split.inputs[0]);
  if (v.rank() != static_cast<int>(operand.size()) || v.shape[axis] <= 0 || operand[axis] % v.shape[axis] != 0) return -1;
  Shape expected_split = v.shape, expected_repeated = v.shape;
  expected_split.insert(expected_split.begin() + axis + 1, 1);
  expected_repeated.insert(expected_repeated.begin() + axis + 1, operand[axis] / v.shape[axis]);
  for (size_t d = 0; d < operand.size(); ++d)
    if (d != axis && v.shape[d] != operand[d]) return -1;
  if (split.shape != expected_split || repeated.shape != expected_repeated) return -1;
  *blocks = v.shape[axis];
  return v.id;
}

struct Fp8Product {
  Dequantized a, b;
  bool b_transposed = false;  // B is the transpose of the dequantized [N][K] value
  // Blocks of K with scales of their own (0: each scale constant along K): a's scale is then
  // [..., M, blocks] or constant along K, b's [blocks, N] (as B is read) or constant along K.
  int64_t blocks = 0;
};

std::optional<Fp8Product> MatchFp8Product(const Graph& g, const Node& product, const Fp8ProductOptions& options) {
  const bool block_scales = options.block_scales;
  const Node &a = g.node(product.inputs[0]), &b = g.node(product.inputs[1]);
  // B shared by every batch entry, and K rows of whole 16-byte units (TMA's row strides).
  if (a.rank() < 2 || b.rank() != 2 || a.shape.back() % 16 != 0) return std::nullopt;
  Fp8Product p;
  int b_value = b.id;
  if (b.op == OpCode::kTranspose && b.attrs.perm == std::vector<int64_t>{1, 0}) {
    p.b_transposed = true;
    b_value = b.inputs[0];
  }
  // MatMulInteger's product is f64 (exact); the int8 product's f32 sum is what its usual
  // consumer, a cast of the int32 result to f32, would round it to (to an ulp: the zero point's
  // term is taken off in f32).
  const bool integer_product = product.dtype == DType::kF64;
  if (integer_product && !options.int8) return std::nullopt;
  std::optional<Dequantized> da = integer_product ? MatchIntegerOperand(g, a.id) : MatchDequantized(g, a.id, options.int8);
  std::optional<Dequantized> db = integer_product ? MatchIntegerOperand(g, b_value) : MatchDequantized(g, b_value, options.int8);
  if (!da || !db) return std::nullopt;
  const Node &qa = g.node(da->quantized), &qb = g.node(db->quantized);
  // One tensor-core type a kernel (uint8 A shifted into int8, below); B K-major: wᵀ read from
  // w, or a constant stored so.
  const bool int8 = Int8Operands(g, *da, *db);
  if ((qa.dtype != qb.dtype && !int8) || (!p.b_transposed && qb.op != OpCode::kConstant)) return std::nullopt;
  if ((IsInteger(qa.dtype) || IsInteger(qb.dtype)) && !int8) return std::nullopt;  // B asymmetric or uint8, or int8 not asked for
  const size_t a_k = qa.rank() - 1, b_k = p.b_transposed ? 1 : 0;
  // A's zero point comes out of the sum as its scale does: constant along K.
  if (da->zero >= 0 && !ConstantAlong(g.node(da->zero).shape, qa.shape, a_k)) return std::nullopt;
  if (da->scale >= 0 && !ConstantAlong(g.node(da->scale).shape, qa.shape, a_k)) {
    const int blocked = block_scales ? BlockedScale(g, da->scale, qa.shape, a_k, &p.blocks) : -1;
    if (blocked < 0) return std::nullopt;
    da->scale = blocked;
  }
  if (db->scale >= 0 && !ConstantAlong(g.node(db->scale).shape, qb.shape, b_k)) {
    int64_t blocks = 0;
    const int blocked = block_scales ? BlockedScale(g, db->scale, qb.shape, b_k, &blocks) : -1;
    if (blocked < 0 || (p.blocks != 0 && blocks != p.blocks)) return std::nullopt;
    db->scale = blocked;
    p.blocks = blocks;
  }
  // The GEMM template scales whole K steps of 128 (LowerGemmTemplate): smaller blocks stay as
  // written, dequantized on the GPU, rather than a block_scaled_matmul only the host computes.
  // int8 sums are exact: block scales stay as written there.
  if (p.blocks != 0 && ((qa.shape.back() / p.blocks) % 128 != 0 || int8)) return std::nullopt;
  // int8 sums in int32: exact while K · 128² stays below 2^31.
  if (int8 && qa.shape.back() >= (int64_t{1} << 17)) return std::nullopt;
  p.a = *da;
  p.b = *db;
  return p;
}

// Asymmetric A (a zero point z, or uint8 shifted into int8 by 128: q - 128 - (z - 128)):
// Σ_k (a_k - z) · b_k = Σ_k a_k · b_k - z · Σ_k b_k. The column sums of int8 B (exact in f32:
// below 128 · 2^17) fold where B is constant; where B is wᵀ they are w's row sums, read from w
// (the product's own transpose left to it alone, read K-major in place). z - 128 for uint8.
Value ZeroPointTerm(GraphBuilder& b, GraphRewriter& rewriter, const Fp8Product& p) {
  Value zero = p.a.zero >= 0 ? b.Cast(rewriter.Map(p.a.zero), DType::kF32) : b.Scalar(0.0, DType::kF32);
  if (rewriter.source().node(p.a.quantized).dtype == DType::kU8) zero = b.AddScalar(zero, -128);
  Value w = b.Cast(rewriter.Map(p.b.quantized), DType::kF32);
  return b.Mul(zero, b.Reduce(OpCode::kReduceSum, w, {p.b_transposed ? 1 : 0}, false));
}

}  // namespace

StatusOr<Graph> MakeFp8Products(const Graph& graph, const Fp8ProductOptions& options) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    const std::optional<Fp8Product> p = node.op == OpCode::kMatMul ? MatchFp8Product(graph, node, options) : std::nullopt;
    if (!p) {
      rewriter.CopyNode(node);
      continue;
    }
    GraphBuilder& b = rewriter.builder();
    rewriter.SetLocation(node);
    const bool scaled = p->a.scale >= 0;  // (MatMulInteger's operands have none)
    Value qb = rewriter.Map(p->b.quantized), scale_b = scaled ? rewriter.Map(p->b.scale) : Value{};
    if (p->b_transposed) {
      qb = b.Transpose(qb, {1, 0});
      if (scaled && b.rank(scale_b) == 2) scale_b = b.Transpose(scale_b, {1, 0});
    }
    Value qa = rewriter.Map(p->a.quantized), scale_a = scaled ? rewriter.Map(p->a.scale) : Value{};
    if (p->blocks == 0) {
      const bool shifted = p->a.zero >= 0 || b.dtype(qa) == DType::kU8;
      if (b.dtype(qa) == DType::kU8) qa = b.Cast(b.AddScalar(b.Cast(qa, DType::kI32), -128), DType::kI8);  // exact: 0..255 to -128..127
      Value product = b.MatMul(qa, qb);  // f32 (of int8: the exact sum rounded to f32)
      if (shifted) product = b.Sub(product, ZeroPointTerm(b, rewriter, *p));
      if (scaled) product = b.Mul(b.Mul(product, scale_a), scale_b);
      rewriter.SetMap(node.id, b.Cast(product, node.dtype));
      continue;
    }
    // Block scales: [..., M, blocks] and [blocks, N], a scale constant along K repeated.
    Shape a_scales = b.shape(qa);
    a_scales.back() = p->blocks;
    const Shape b_scales = {p->blocks, b.shape(qb)[1]};
    // (A scale constant along K broadcasts to them: its K entry is 1 or absent.)
    scale_a = b.BroadcastTo(b.Cast(scale_a, DType::kF32), a_scales);
    scale_b = b.BroadcastTo(b.Cast(scale_b, DType::kF32), b_scales);
    Value product = b.AddNode(OpCode::kBlockScaledMatMul, {qa, qb, scale_a, scale_b}, {});  // f32
    rewriter.SetMap(node.id, b.Cast(product, node.dtype));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
