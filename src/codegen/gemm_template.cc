#include "codegen/gemm_template.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/gemm_partner_columns.h"
#include "codegen/lower.h"
#include "ir/zeros.h"

namespace tilefuse {

namespace {

bool AllOnes(const Shape& s, size_t count) {
  for (size_t d = 0; d < count; ++d)
    if (s[d] != 1) return false;
  return true;
}

// The epilogue as a pointwise Kernel over the product's flat offset (loop variable 0),
// with a store of the product itself when the group outputs it.
StatusOr<Kernel> FlatEpilogue(const Graph& g, const FusionGroup& group, const GemmSplit& split, const std::vector<bool>& inlined) {
  const Node& product = g.node(split.matmul);
  const int64_t elements = NumElements(product.shape);
  Kernel k;
  if (!split.epilogue.nodes.empty()) {
    ASSIGN_OR_RETURN(k, LowerEpilogue(g, split.epilogue, inlined));
    if (k.outer != elements || k.inner != 1 || !k.reductions.empty())
      return Unimplemented("the epilogue does not iterate over the product's elements");
  } else {
    k.kind = GroupKind::kPointwise;
    k.outer = elements;
  }
  if (std::find(group.outputs.begin(), group.outputs.end(), split.matmul) != group.outputs.end()) StoreAnchorItself(k, g, split.matmul);
  return k;
}

// A as a strided view of `source` (whose flat offset is `index` over A's flat offset, variable
// 0), its rows in batch entries of `entry_rows`, when that view is a rank-4 TMA map
// (GemmOperandView); else nullopt.
std::optional<GemmOperandView> ViewWithEntryRows(const Index& index, int source, int64_t entry_rows, const GemmTemplateKernel& t) {
  if (entry_rows < 1) return std::nullopt;  // an empty product: nothing to read
  const int64_t entries = t.rows / entry_rows;
  // A's flat offset as (row in entry 1, column in head 2, head 3, entry 4); the head size
  // is the smallest multiple of 64 under which the view's index is a sum of strides.
  const Index row = IndexAdd(IndexMul(IndexVar(4, entries), entry_rows), IndexVar(1, entry_rows));
  for (int64_t head = 64; head <= t.k; head += 64) {
    if (t.k % head != 0) continue;
    Index column = IndexAdd(IndexMul(IndexVar(3, t.k / head), head), IndexVar(2, head));
    Index storage = SubstituteVar(index, 0, IndexAdd(IndexMul(row, t.k), column));
    std::vector<LinearTerm> terms;
    int64_t offset = 0;
    if (UsesValue(storage) || !AsLinearTerms(storage, &terms, &offset)) continue;
    GemmOperandView view_of_a;
    view_of_a.node = source;
    view_of_a.offset = offset;
    view_of_a.head = head;
    view_of_a.entry_rows = entry_rows;
    view_of_a.heads = t.k / head;
    view_of_a.entries = entries;
    bool ok = true, contiguous = false;
    std::array<bool, 5> seen{};
    for (const LinearTerm& term : terms) {
      ok = ok && term.divisor == 1 && term.coefficient > 0 && term.var >= 1 && term.var <= 4 && !seen[term.var];
      if (!ok) break;
      seen[term.var] = true;
      if (term.var == 2) contiguous = term.coefficient == 1;
      else view_of_a.stride[term.var == 1 ? 0 : term.var == 3 ? 1 : 2] = term.coefficient;
    }
    // Every dimension of more than one element must step through the value (no broadcast).
    const int64_t extents[5] = {0, entry_rows, head, t.k / head, entries};
    for (int var = 1; var <= 4; ++var) ok = ok && (seen[var] || extents[var] == 1);
    // TMA: the inner dim contiguous, a 16-byte aligned start and 16-byte multiple strides.
    for (int64_t s : view_of_a.stride) ok = ok && s % 8 == 0;
    if (!ok || !contiguous || offset % 8 != 0) continue;
    return view_of_a;
  }
  return std::nullopt;
}

// Whether `view` reads A's rows of K elements one after another from its start: A's memory as it is.
bool IsPlainMatrix(const GemmOperandView& view, const GemmTemplateKernel& t) {
  return view.offset == 0 && view.stride[0] == t.k && (view.heads == 1 || view.stride[1] == view.head) &&
         (view.entries == 1 || view.stride[2] == view.entry_rows * t.k);
}

// A as a strided view of the value its prologue reads, when the prologue only views it
// (no arithmetic, same dtype) and the view is a rank-4 TMA map (GemmOperandView); else
// nullopt and the prologue materialises A as before. Row tiles are 128 unless every row fits
// in 64 (ResolveGemmConfig): a view is taken only where 128-row tiles stay inside a batch
// entry, which then holds for 64 too. A's batch entries are its own leading dims, or for a
// matrix A (PyTorch's linear layers flatten [batch, T, features] to [batch·T, features]) a
// dim of the source that is a whole number of 128-row tiles and divides A's rows: the merged
// heads of [batch, heads, T, d] are a map only with entries of T rows (GPT-2's out-projection
// read them through a prologue's copy, 3.5 µs a layer at 8x512, H200, 2026-12-01).
std::optional<GemmOperandView> OperandAView(const Graph& g, const FusionGroup& view, const std::vector<bool>& inlined,
                                            const GemmTemplateKernel& t) {
  constexpr int64_t kRowTile = 128;
  const Node& a = g.node(t.a);
  StatusOr<Kernel> k = LowerGroup(g, view, inlined);
  if (!k.ok() || k->stores.size() != 1 || k->inner != 1 || !k->reductions.empty()) return std::nullopt;
  const ScalarValue& v = k->values[k->stores[0].value];
  if (v.kind != ScalarValue::Kind::kLoad || k->buffers[v.buffer].dtype != a.dtype) return std::nullopt;
  const int source = k->buffers[v.buffer].node;
  if (a.rank() > 2) {
    const int64_t entry_rows = a.shape[a.rank() - 2];
    if (t.rows / std::max<int64_t>(1, entry_rows) > 1 && entry_rows % kRowTile != 0) return std::nullopt;
    return ViewWithEntryRows(v.index, source, entry_rows, t);
  }
  if (std::optional<GemmOperandView> whole = ViewWithEntryRows(v.index, source, t.rows, t)) return whole;
  for (int64_t entry_rows : g.node(source).shape)  // the source's own dims: T of [batch, heads, T, d]
    if (entry_rows % kRowTile == 0 && entry_rows < t.rows && t.rows % entry_rows == 0)
      if (std::optional<GemmOperandView> found = ViewWithEntryRows(v.index, source, entry_rows, t)) return found;
  return std::nullopt;
}

const Node* Input(const Graph& g, const Node& n, OpCode op) {
  if (n.inputs.empty()) return nullptr;
  const Node& in = g.node(n.inputs[0]);
  return in.op == op ? &in : nullptr;
}

bool IsZeroScalar(const Graph& g, int id) {
  const Node& n = g.node(id);
  return n.op == OpCode::kConstant && n.attrs.value && n.attrs.value->num_elements() == 1 && n.attrs.value->GetDouble(0) == 0.0;
}

// A as an implicit GEMM over an NHWC activation (GemmConvWindow), when A's prologue is
// exactly the channels-last convolution's view chain; else nullopt.
std::optional<GemmConvWindow> OperandAConv(const Graph& g, const FusionGroup& prologue, const GemmTemplateKernel& t) {
  const Node* reshape = &g.node(t.a);
  if (reshape->op != OpCode::kReshape) return std::nullopt;
  while (const Node* inner = Input(g, *reshape, OpCode::kReshape)) reshape = inner;
  const Node* columns = Input(g, *reshape, OpCode::kTranspose);
  if (!columns || columns->attrs.perm != std::vector<int64_t>{0, 2, 3, 4, 5, 1}) return std::nullopt;
  const Node* window = Input(g, *columns, OpCode::kWindow);
  if (!window || window->attrs.kernel.size() != 2 || !IsZeroScalar(g, window->inputs[1])) return std::nullopt;
  const Node* nchw = Input(g, *window, OpCode::kTranspose);
  if (!nchw || nchw->attrs.perm != std::vector<int64_t>{0, 3, 1, 2}) return std::nullopt;
  const Node& source = g.node(nchw->inputs[0]);
  // The chain must be the prologue's own (views it would copy), the activation outside it.
  std::vector<int> chain;
  for (const Node* n = &g.node(t.a); n != &source; n = &g.node(n->inputs[0])) chain.push_back(n->id);
  for (int id : chain)
    if (std::find(prologue.nodes.begin(), prologue.nodes.end(), id) == prologue.nodes.end()) return std::nullopt;
  if (std::find(prologue.nodes.begin(), prologue.nodes.end(), source.id) != prologue.nodes.end()) return std::nullopt;
  if (source.dtype != t.dtype || source.rank() != 4) return std::nullopt;
  GemmConvWindow c;
  c.node = source.id;
  c.images = source.shape[0];
  c.height = source.shape[1];
  c.width = source.shape[2];
  c.channels = source.shape[3];
  c.out_height = window->shape[2];
  c.out_width = window->shape[3];
  const Attrs& a = window->attrs;
  c.kernel = {a.kernel[0], a.kernel[1]};
  c.strides = {a.strides[0], a.strides[1]};
  c.dilations = {a.dilations[0], a.dilations[1]};
  c.pads = {a.pads[0], a.pads[1], a.pads[2], a.pads[3]};
  // A K step (one 128-byte swizzle row of channels) stays in one filter tap.
  const int64_t step_channels = 128 / static_cast<int64_t>(DTypeSize(t.operand_dtype));
  if (c.channels % step_channels != 0 || t.rows != c.images * c.out_height * c.out_width ||
      t.k != c.kernel[0] * c.kernel[1] * c.channels)
    return std::nullopt;
  // TMA's limits: traversal strides 1..8; a 4-D map's corners fit in 8 signed bits; tap
  // offsets in 16 bits.
  for (int d = 0; d < 2; ++d) {
    const int64_t lower = -c.pads[d], upper = c.pads[2 + d] - (c.kernel[d] - 1) * c.dilations[d];
    if (c.strides[d] < 1 || c.strides[d] > 8 || lower < -128 || lower > 127 || upper < -128 || upper > 127 ||
        (c.kernel[d] - 1) * c.dilations[d] > 65535)
      return std::nullopt;
  }
  return c;
}

// The [rows][cols] value `operand` is the plain transpose of (perm [1, 0], the same dtype), or
// -1. Its rows are TMA's outer dimension: a whole number of 16-byte units.
int PlainTransposeSource(const Graph& g, int operand, DType dtype, int64_t rows, int64_t cols) {
  const Node& transpose = g.node(operand);
  if (transpose.op != OpCode::kTranspose || transpose.attrs.perm != std::vector<int64_t>{1, 0}) return -1;
  const Node& source = g.node(transpose.inputs[0]);
  if (source.dtype != dtype || source.shape != Shape{rows, cols} || (cols * static_cast<int64_t>(DTypeSize(dtype))) % 16 != 0) return -1;
  return source.id;
}

// The value `padded` appends zero rows to, where `padded` is concat(value, zeros) along rows
// (rank 2, the same dtype) that the prologue computes, as its output or for no other reader;
// else -1. Appends the concat and the zeros' nodes the prologue computes to `computed`.
int ZeroRowsAppended(const Graph& g, const FusionGroup& prologue, const std::vector<int>& materialized, int padded, DType dtype,
                     std::vector<int>* computed) {
  auto in_prologue = [&](int id) { return std::find(prologue.nodes.begin(), prologue.nodes.end(), id) != prologue.nodes.end(); };
  const Node& concat = g.node(padded);
  // (Written by another prologue, the concat is in memory anyway; this prologue's own output
  // is the copy the template then does without.)
  const bool own_output = prologue.outputs == std::vector<int>{padded};
  if (concat.op != OpCode::kConcat || concat.attrs.axis != 0 || concat.inputs.size() != 2 || !in_prologue(padded) ||
      (!own_output && std::find(materialized.begin(), materialized.end(), padded) != materialized.end()))
    return -1;
  std::vector<int> zeros;
  const Node& shorter = g.node(concat.inputs[0]);
  if (!IsZeros(g, concat.inputs[1], &zeros) || shorter.dtype != dtype || shorter.rank() != 2) return -1;
  computed->push_back(padded);
  for (int id : zeros)
    if (in_prologue(id)) computed->push_back(id);
  return shorter.id;
}

// Whether the prologue computes exactly the nodes of `computed` (views and paddings the
// template reads through) and nothing else.
bool ComputesOnly(const FusionGroup& prologue, std::vector<int> computed) {
  std::vector<int> nodes = prologue.nodes;
  std::sort(nodes.begin(), nodes.end());
  std::sort(computed.begin(), computed.end());
  return nodes == computed;
}

// A [K][N] operand B its prologue only pads with zero rows of K (an LM head's input gradient
// g · w over a vocabulary padded to 16-byte rows, w the [vocabulary][hidden] weight): the
// weight itself, TMA filling the rows past it with zeros; else -1. (GPT-2's prologue copied
// the 77 MB weight every step.)
int ZeroPaddedKRowsSource(const Graph& g, const FusionGroup& prologue, const std::vector<int>& materialized, int operand, DType dtype) {
  std::vector<int> computed;
  const int shorter = ZeroRowsAppended(g, prologue, materialized, operand, dtype, &computed);
  if (shorter < 0 || (g.node(shorter).shape[1] * static_cast<int64_t>(DTypeSize(dtype))) % 16 != 0) return -1;
  return ComputesOnly(prologue, computed) ? shorter : -1;  // else the prologue computes more than the padding
}

// The value `operand` transposes where that value is in memory: the prologue computes
// nothing else, or the value is another prologue's output (`materialized`: the group writes
// it for a reader outside). Else -1. The template then reads the operand from it in the other
// major order: B K-major from a linear layer's [N][K] weight, A MN-major from the [K][M]
// activation of a weight gradient (xᵀ · dy). (GPT-2's LM-head weight gradient dlogits'ᵀ · H,
// with dlogits' the zero-padded copy its group writes for the input gradient too, transposed
// that copy element by element in a prologue of its own instead: 2564 µs, H200, 2026-11-30.)
int TransposedSource(const Graph& g, const FusionGroup& prologue, const std::vector<int>& materialized, int operand, DType dtype,
                     int64_t rows, int64_t cols, int64_t* source_rows = nullptr) {
  int source = PlainTransposeSource(g, operand, dtype, rows, cols);
  if (source < 0) return -1;
  auto in_prologue = [&](int id) { return std::find(prologue.nodes.begin(), prologue.nodes.end(), id) != prologue.nodes.end(); };
  std::vector<int> computed = {operand};
  // [rows][cols] as a shorter value with zero rows appended: read the value itself, TMA
  // filling the rest with zeros.
  if (source_rows) {
    const int shorter = ZeroRowsAppended(g, prologue, materialized, source, dtype, &computed);
    if (shorter >= 0) *source_rows = g.node(shorter).shape[0], source = shorter;
  }
  // Reshapes between the value in memory and the transpose keep every element's offset (a
  // weight gradient's x[8, 512, 768] viewed as [4096, 768]): read the value they view, whose
  // memory is the [rows][cols] matrix. (LLaMA-style and GPT-2 steps made a transposed copy of
  // each such operand in a prologue: GPT-2's ~0.5 ms a step, H200, 2026-11-30.)
  while (g.node(source).op == OpCode::kReshape && in_prologue(source) &&
         std::find(materialized.begin(), materialized.end(), source) == materialized.end()) {
    computed.push_back(source);
    source = g.node(source).inputs[0];
  }
  if (ComputesOnly(prologue, computed)) return source;  // the prologue computes nothing but the views
  if (source_rows && *source_rows) {  // the padding seen through only where the prologue computes nothing else
    *source_rows = 0;
    return -1;
  }
  return std::find(materialized.begin(), materialized.end(), source) != materialized.end() ? source : -1;
}

}  // namespace

bool AtProductPosition(const GemmTemplateKernel& g, const Index& index) {
  AffineIndex a;
  return !UsesValue(index) && AsAffine(index, &a) && a.c0 == g.n && a.c1 == 1 && a.offset == 0;
}

bool PairsAreAdjacent(const GemmTemplateKernel& g, const Index& index) {
  if (AtProductPosition(g, index)) return true;
  const int64_t rows = g.rows * g.batch;
  if (g.n % 2 != 0 || g.n > 16384 || rows < 1 || UsesValue(index)) return false;
  for (int64_t row : {int64_t{0}, rows / 2, rows - 1})
    for (int64_t col = 0; col < g.n; col += 2) {
      const std::optional<int64_t> first = EvaluateIndex(index, {row, col}), second = EvaluateIndex(index, {row, col + 1});
      if (!first || !second || *first % 2 != 0 || *second != *first + 1) return false;
    }
  return true;
}

StatusOr<GemmTemplateKernel> LowerGemmTemplate(const Graph& g, const FusionGroup& group, const GemmSplit& split,
                                               const std::vector<bool>& inlined, bool tf32, const SymbolicShapes* symbolic) {
  const Node& mm = g.node(split.matmul);
  tf32 = tf32 || mm.attrs.tf32;  // a product the graph lets round to TF32 (a PyTorch convolution's)
  const bool half = IsHalf(mm.dtype);
  const DType operands = g.node(mm.inputs[0]).dtype;
  const bool int8 = operands == DType::kI8 && mm.dtype == DType::kF32;  // an f32 product of int8 (exact int32 sums)
  // An f32 product of 8-bit floats or of int8: K-major operands of one byte.
  const bool eight_bit = IsFloat8(operands) || int8;
  const char* kind = int8 ? "int8" : eight_bit ? "FP8" : tf32 ? "TF32" : "3xTF32";
  if (eight_bit && g.node(mm.inputs[1]).dtype != operands)
    return Unimplemented(fmt::format("the {} GEMM template multiplies operands of one 8-bit type (e4m3 by e4m3, e5m2 by e5m2, int8 by int8)", kind));
  if (IsFloat8Fnuz(operands)) return Unimplemented("no tensor core takes the FNUZ 8-bit floats");
  if (!half && mm.dtype != DType::kF32)
    return Unimplemented(fmt::format("the GEMM template takes bf16, f16, f32 (as TF32 or 3xTF32) and int8 products, not {} ones of {}",
                                     DTypeName(mm.dtype), DTypeName(operands)));
  ASSIGN_OR_RETURN(GemmTemplateKernel t, LowerGemmProblem(g, group, split, inlined));
  if (symbolic && !symbolic->empty()) {
    // Rows over every batch entry of a shared weight (the product's elements over N), else A's own.
    const Node& a = g.node(t.a);
    t.symbols = symbolic->values;
    t.rows_size = t.batch == 1 ? symbolic->Elements(split.matmul).DividedBy(SymExpr::Constant(t.n)).value_or(SymExpr::Constant(t.rows))
                               : symbolic->dims.at(static_cast<size_t>(t.a)).at(a.shape.size() - 2);
  }
  t.split_f32 = mm.dtype == DType::kF32 && !tf32 && !eight_bit;
  // TMA strides are multiples of 16 bytes: whole rows of A's K elements, and of B's N
  // elements where B is read [K][N] (checked below, once B's layout is known).
  const int64_t unit = 16 / static_cast<int64_t>(DTypeSize(t.operand_dtype));
  if (t.k % unit != 0) return Unimplemented(fmt::format("K = {} must be a multiple of {} for TMA's 16-byte row strides", t.k, unit));
  if (!half && t.batch != 1)
    return Unimplemented(fmt::format("the {} GEMM template takes a B shared by every batch entry (a weight) only", kind));
  // A read through its prologue's views instead of the copy the prologue would make (with a
  // shared B only: its rows fold every batch entry). A batched B is read [K][N]: whole 16-byte
  // rows of N (BERT's scores at 100 keys: Kᵀ [64][100] is no TMA operand).
  if (t.batch != 1 && t.n % unit != 0)
    return Unimplemented(fmt::format("N = {} must be a multiple of {} for TMA's 16-byte row strides (a batched B read [K][N])", t.n, unit));
  if (t.batch != 1) return t;
  const std::vector<FusionGroup> prologues = PrologueGroups(g, group, split);
  std::vector<int> materialized;
  for (const FusionGroup& prologue : prologues) materialized.insert(materialized.end(), prologue.outputs.begin(), prologue.outputs.end());
  for (const FusionGroup& prologue : prologues) {
    if (prologue.outputs == std::vector<int>{t.b}) {
      t.b_k_major = TransposedSource(g, prologue, materialized, t.b, t.operand_dtype, t.n, t.k, &t.b_rows);
      const int source = half && t.b_k_major < 0 ? ZeroPaddedKRowsSource(g, prologue, materialized, t.b, t.operand_dtype) : -1;
      if (source >= 0) t.b = source, t.b_k_rows = g.node(source).shape[0];
    }
    if (prologue.outputs != std::vector<int>{t.a}) continue;
    if (eight_bit) continue;  // (an 8-bit A as its prologue makes it: the readings below not run on a GPU for it)
    // Where the prologue only views a value, A is read where it lies: as an implicit GEMM's
    // im2col, MN-major (16-bit products only: TF32 and 3xTF32 read A K-major), or through the
    // view (merged heads; a plain matrix is read as itself, below). BERT-base's f32 q, k and v
    // each copied their layer norm's output first, 36 prologue kernels at 1x128.
    t.a_conv = OperandAConv(g, prologue, t);
    if (!t.a_conv && half) t.a_mn_major = TransposedSource(g, prologue, materialized, t.a, t.operand_dtype, t.k, t.rows);
    if (!t.a_conv && t.a_mn_major < 0) t.a_view = OperandAView(g, prologue, inlined, t);
  }
  // A view that is the plain [rows][K] matrix, A's own bytes (a reshape's input: a linear layer's
  // [batch·T, K] view of its activation through torch.compile) is read as A itself, by a plain
  // map, which the skinny template takes too: a decode step's linears went to the GEMM template's
  // 64-row tiles instead.
  if (t.a_view && IsPlainMatrix(*t.a_view, t)) {
    t.a = t.a_view->node;
    t.a_view.reset();
  }
  // A constant weight stored K-major (passes/k_major_weights.h) is B's transpose, computed
  // where it is read (an inlined generator), not by a prologue: read the constant instead.
  if (t.b_k_major < 0 && inlined[t.b]) {
    const int source = PlainTransposeSource(g, t.b, t.operand_dtype, t.n, t.k);
    if (source >= 0 && g.node(source).op == OpCode::kConstant) t.b_k_major = source;
  }
  // Block scales: each block whole K steps (128 columns of 8-bit K), the scales in memory.
  if (t.scale_blocks) {
    if (t.k % (t.scale_blocks * 128) != 0)
      return Unimplemented(fmt::format("blocks of {} columns of K: the FP8 template scales whole steps of 128", t.k / t.scale_blocks));
    if (inlined[t.block_scale_a] || inlined[t.block_scale_b]) return Unimplemented("block scales computed where they are read");
  }
  // The 3xTF32 form writes B's parts K-major itself (a weight given as [in][out]: GPT-2's Conv1D).
  if (!half && !t.split_f32 && t.b_k_major < 0)
    return Unimplemented(fmt::format("{} tensor cores read B K-major only: this product's B is not the transpose of an [N][K] value", kind));
  // B read K-major ([N][K], rows of K) takes any N: the last tile's columns past N arrive as
  // zeros, and an output whose rows are not 16-byte aligned is stored without TMA
  // (gemm_layout::StagedStore). A GPT-2 LM head (N = 50257) runs so from its weight as stored.
  if (t.n % unit != 0 && t.b_k_major < 0)
    return Unimplemented(fmt::format("N = {} must be a multiple of {} for TMA's 16-byte row strides (B read [K][N])", t.n, unit));
  const OpCode b_source = g.node(t.b_k_major >= 0 ? t.b_k_major : t.b).op;
  t.b_read_only = b_source == OpCode::kParameter || b_source == OpCode::kConstant;
  return t;
}

// Whether a block-scaled product's B scales ([blocks][N]) are a constant whose every row
// repeats one value over each aligned run of `columns` columns (the last run may be short).
static bool ScalesShareColumns(const Node& scales, int64_t columns) {
  if (scales.op != OpCode::kConstant || scales.shape.size() != 2 || !scales.attrs.value) return false;
  const Tensor& v = *scales.attrs.value;
  const int64_t n = scales.shape[1];
  for (int64_t row = 0; row < scales.shape[0]; ++row)
    for (int64_t col = 0; col < n; ++col)
      if (v.GetDouble(row * n + col) != v.GetDouble(row * n + col / columns * columns)) return false;
  return true;
}

StatusOr<GemmTemplateKernel> LowerGemmProblem(const Graph& g, const FusionGroup& group, const GemmSplit& split,
                                              const std::vector<bool>& inlined) {
  const Node& mm = g.node(split.matmul);
  const Node &a = g.node(mm.inputs[0]), &b = g.node(mm.inputs[1]);
  if (a.shape.size() < 2 || b.shape.size() < 2) return Unimplemented("a matrix-vector product (an operand of rank 1)");
  GemmTemplateKernel t;
  t.dtype = mm.dtype;
  t.operand_dtype = a.dtype;
  t.product = split.matmul;
  t.a = mm.inputs[0];
  t.b = mm.inputs[1];
  t.k = a.shape.back();
  t.n = b.shape.back();
  const int64_t m = a.shape[a.shape.size() - 2];
  const int64_t entries = NumElements(mm.shape) / std::max<int64_t>(1, m * t.n);
  if (AllOnes(b.shape, b.shape.size() - 2) && NumElements(a.shape) == entries * m * t.k) {
    t.rows = entries * m;  // a weight shared by every batch entry: one product over all rows
    t.batch = 1;
  } else if (NumElements(a.shape) == entries * m * t.k && NumElements(b.shape) == entries * t.k * t.n) {
    t.rows = m;
    t.batch = entries;
  } else {
    return Unimplemented("batch dimensions broadcast in a way the GEMM template does not take (only a shared B)");
  }
  if (mm.op == OpCode::kBlockScaledMatMul) {
    t.block_scale_a = mm.inputs[2];
    t.block_scale_b = mm.inputs[3];
    t.scale_blocks = g.node(mm.inputs[3]).shape[0];
    if (t.batch != 1) return Unimplemented("a block-scaled FP8 product of a B per batch entry");
    if (ScalesShareColumns(g.node(t.block_scale_b), kWeightScaleColumns)) t.b_scale_columns = kWeightScaleColumns;
  }
  t.store_product = std::find(group.outputs.begin(), group.outputs.end(), split.matmul) != group.outputs.end();
  t.outputs = group.outputs;
  ASSIGN_OR_RETURN(Kernel k, FlatEpilogue(g, group, split, inlined));
  std::vector<int> shifted;  // loads of the product elsewhere than at the element computed
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind != ScalarValue::Kind::kLoad || k.buffers[value.buffer].node != split.matmul) continue;
    if (UsesValue(value.index)) return Unimplemented("the epilogue reads the product through a gather");
    AffineIndex affine;
    if (!AsAffine(value.index, &affine) || affine.c0 != 1 || affine.c1 != 0 || affine.offset != 0) shifted.push_back(static_cast<int>(v));
  }
  // Flat offset = row × N + column: the simplifier turns the epilogue's divisions and
  // remainders by N (a bias's column, a residual's row) into the two variables.
  const int64_t all_rows = t.rows * t.batch;
  Index flat = IndexAdd(IndexMul(IndexVar(0, all_rows), t.n), IndexVar(1, t.n));
  for (ScalarValue& v : k.values) v.index = SubstituteVar(v.index, 0, flat);
  for (KernelStore& s : k.stores) s.index = SubstituteVar(s.index, 0, flat);
  k.outer = all_rows;
  k.inner = t.n;
  k.nodes = group.nodes;
  if (!shifted.empty()) {
    ASSIGN_OR_RETURN(PartnerColumns partner, FindPartnerColumns(k, all_rows, t.n, shifted));
    t.partner = partner.distance;
    t.partner_loads = std::move(partner.loads);
  }
  t.epilogue = std::move(k);
  return t;
}

}  // namespace tilefuse
