#include "codegen/attention_template.h"

#include <fmt/format.h>
#include <optional>

#include "codegen/attention_lower.h"

namespace tilefuse {

namespace {

// The head dims the kernel is written for (one or two 128-byte swizzle rows per Q/K row).
bool SupportedHeadDim(int64_t d) { return d == 64 || d == 128; }

// The value of a scalar in `k`: a literal, or a load of a single-element constant; none
// when it is anything else.
std::optional<double> ScalarOf(const Graph& g, const Kernel& k, const std::vector<KernelBuffer>& buffers, int v) {
  const ScalarValue& s = k.values[v];
  if (s.kind == ScalarValue::Kind::kConstant) return s.constant;
  if (s.kind != ScalarValue::Kind::kLoad || s.buffer < 0) return std::nullopt;
  const Node& n = g.node(buffers[s.buffer].node);
  if (n.op != OpCode::kConstant || !n.attrs.value || n.attrs.value->num_elements() != 1) return std::nullopt;
  return n.attrs.value->GetDouble(0);
}

// Peels float casts and products with scalars off program value `v`: returns the value
// under them and multiplies `factor` by the scalars.
int PeelScalarScale(const Graph& g, const Kernel& k, const std::vector<KernelBuffer>& buffers, int v, double* factor) {
  for (;;) {
    const ScalarValue& s = k.values[v];
    if (s.kind != ScalarValue::Kind::kOp) return v;
    if (s.op == OpCode::kCast && IsFloat(s.dtype) && IsFloat(k.values[s.args[0]].dtype)) {
      v = s.args[0];
      continue;
    }
    if (s.op != OpCode::kMul) return v;
    if (std::optional<double> c = ScalarOf(g, k, buffers, s.args[1])) {
      *factor *= *c;
      v = s.args[0];
    } else if (std::optional<double> c0 = ScalarOf(g, k, buffers, s.args[0])) {
      *factor *= *c0;
      v = s.args[1];
    } else {
      return v;
    }
  }
}

// Operand `role` of `a` ([batch.., rows, columns] as the matmul reads it) as a strided view
// of the value it loads: its loop variables become (row 0, column 1, output batch dim i
// as 2 + i), and the load's index must come out as a sum of strided terms.
StatusOr<StridedOperand> StridedView(const Graph& g, const AttentionKernel& a, const AttentionOperand& operand, const Shape& out_batch,
                                     const char* role) {
  const Node& n = g.node(operand.node);
  const int64_t rows = n.shape[n.rank() - 2], columns = n.shape.back();
  StridedOperand s;
  s.rows = rows;
  s.columns = columns;
  // The flat offset in the operand of (batch coordinates, row, column); the matmul
  // broadcasts size-1 batch dims of the operand.
  std::vector<Index> multi;
  const size_t skipped = out_batch.size() - (n.rank() - 2);
  for (size_t d = 0; d + 2 < static_cast<size_t>(n.rank()); ++d)
    multi.push_back(n.shape[d] == 1 ? IndexConst(0) : IndexVar(static_cast<int>(2 + d + skipped), n.shape[d]));
  multi.push_back(rows == 1 ? IndexConst(0) : IndexVar(0, rows));
  multi.push_back(columns == 1 ? IndexConst(0) : IndexVar(1, columns));
  Index flat = Ravel(multi, n.shape);
  Index storage;
  if (operand.buffer >= 0) {
    s.node = operand.node;
    s.dtype = n.dtype;
    storage = flat;
  } else {
    // A scalar scale on the operand (exporters put one on Q and Kᵀ) scales the product.
    const int loaded = PeelScalarScale(g, operand.pack, a.buffers, operand.pack_value, &s.scale);
    const ScalarValue& v = operand.pack.values[loaded];
    if (v.kind != ScalarValue::Kind::kLoad || v.buffer < 0)
      return Unimplemented(fmt::format("{} (%{}) is computed inside the group; the attention template reads its operands by TMA, "
                                       "as views of graph values",
                                       role, operand.node));
    s.node = a.buffers[v.buffer].node;
    s.dtype = a.buffers[v.buffer].dtype;
    storage = SubstituteVar(v.index, 0, flat);
  }
  std::vector<LinearTerm> terms;
  if (UsesValue(storage) || !AsLinearTerms(storage, &terms, &s.offset))
    return Unimplemented(fmt::format("{} (%{}) is not a strided view of %{}: its index {} is not a sum of strides", role, operand.node,
                                     s.node, PrintIndex(storage, {"row", "col", "o0", "o1", "o2", "o3"})));
  for (const LinearTerm& t : terms) {
    if (t.var < 2 && t.divisor == 1) {
      (t.var == 0 ? s.row_stride : s.column_stride) = t.coefficient;
      continue;
    }
    if (t.var < 2) return Unimplemented(fmt::format("{} (%{}) divides its row or column index", role, operand.node));
    const int dim = t.var - 2;
    s.batch.push_back({dim, t.divisor, (out_batch[dim] + t.divisor - 1) / t.divisor, t.coefficient});
  }
  // A matrix dimension of size 1 has no term: any stride reads it.
  if (rows == 1 && s.row_stride == 0) s.row_stride = s.column_stride == 1 ? columns : 1;
  if (columns == 1 && s.column_stride == 0) s.column_stride = s.row_stride == 1 ? rows : 1;
  if (s.row_stride != 1 && s.column_stride != 1)
    return Unimplemented(fmt::format("{} (%{}) has neither its rows nor its columns contiguous", role, operand.node));
  if (s.batch.size() > 3)
    return Unimplemented(fmt::format("{} (%{}) has more than three strided batch terms (TMA maps have five dims)", role, operand.node));
  if (s.row_stride < 0 || s.column_stride < 0)
    return Unimplemented(fmt::format("{} (%{}) walks its value backwards (a negative stride); TMA strides are positive", role, operand.node));
  // TMA: a 16-byte aligned start and strides that are multiples of 16 bytes.
  const int64_t elements_per_16_bytes = 16 / static_cast<int64_t>(DTypeSize(s.dtype));
  const int64_t outer_stride = s.RowsContiguous() ? s.column_stride : s.row_stride;
  bool aligned = s.offset % elements_per_16_bytes == 0 && outer_stride % elements_per_16_bytes == 0;
  for (const StridedOperand::BatchTerm& t : s.batch) aligned = aligned && t.stride > 0 && t.stride % elements_per_16_bytes == 0;
  if (!aligned) return Unimplemented(fmt::format("{} (%{}) is not 16-byte aligned for TMA (offset or strides)", role, operand.node));
  return s;
}

}  // namespace

bool AttentionTemplateKernel::SizesAtLaunch() const {
  if (symbols.empty() || batch_sizes.size() != batch_shape.size()) return false;
  bool symbolic = !nq_size.IsConstant() || !nk_size.IsConstant();
  for (size_t d = 0; d < batch_sizes.size(); ++d) {
    if (!batch_sizes[d].Is(batch_shape[d], symbols)) return false;
    symbolic = symbolic || !batch_sizes[d].IsConstant();
  }
  return symbolic && nq_size.Is(nq, symbols) && nk_size.Is(nk, symbols);
}

StatusOr<AttentionTemplateKernel> LowerAttentionTemplate(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                                         const SymbolicShapes* symbolic) {
  ASSIGN_OR_RETURN(AttentionKernel a, LowerAttention(g, group, inlined, symbolic));
  AttentionTemplateKernel t;
  t.zero_nan_rows = a.zero_nan_rows;
  t.nq = a.nq;
  t.nk = a.nk;
  t.d = a.d;
  t.dv = a.dv;
  const Node& out = g.node(a.buffers[a.output].node);
  t.dtype = out.dtype;
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF16)
    return Unimplemented(fmt::format("the attention template takes bf16 and f16 attention, not {}", DTypeName(t.dtype)));
  if (!SupportedHeadDim(t.d) || !SupportedHeadDim(t.dv))
    return Unimplemented(fmt::format("head dims {} (Q·Kᵀ) and {} (P·V): the attention template takes 64 and 128", t.d, t.dv));
  t.batch_shape = Shape(out.shape.begin(), out.shape.end() - 2);
  ASSIGN_OR_RETURN(t.q, StridedView(g, a, a.q, t.batch_shape, "Q"));
  ASSIGN_OR_RETURN(t.k, StridedView(g, a, a.k, t.batch_shape, "Kᵀ"));
  ASSIGN_OR_RETURN(t.v, StridedView(g, a, a.v, t.batch_shape, "V"));
  for (const StridedOperand* s : {&t.q, &t.k, &t.v})
    if (s->dtype != t.dtype)
      return Unimplemented(fmt::format("%{} is {} in a {} attention: the template reads every operand in the output's type", s->node,
                                       DTypeName(s->dtype), DTypeName(t.dtype)));
  if (t.q.column_stride != 1) return Unimplemented("Q is stored transposed (its rows contiguous); the template reads Q row by row");
  t.score_scale = t.q.scale * t.k.scale;
  t.output_scale = t.v.scale;
  t.logits = std::move(a.logits);
  t.logits.buffers = a.buffers;
  t.logit = a.logit;
  t.score_batch_index = a.score_batch_index;
  t.buffers = std::move(a.buffers);
  t.output = a.output;
  t.logsumexp = a.logsumexp;
  t.nq_size = a.nq_size;
  t.nk_size = a.nk_size;
  t.batch_sizes = a.batch_sizes;
  t.symbols = a.symbols;
  if (t.logsumexp >= 0 && t.buffers[t.logsumexp].dtype != DType::kF32)
    return Unimplemented(fmt::format("the rows' logsumexp %{} is {}: the attention template writes it in f32",
                                     t.buffers[t.logsumexp].node, DTypeName(t.buffers[t.logsumexp].dtype)));
  t.name = a.name;
  return t;
}

}  // namespace tilefuse
