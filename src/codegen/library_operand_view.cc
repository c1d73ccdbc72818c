#include "codegen/library_operand_view.h"

#include <algorithm>

#include "codegen/index_expr.h"
#include "codegen/lower.h"

namespace tilefuse {

std::optional<LibraryOperandView> FindLibraryOperandView(const Graph& g, const FusionGroup& prologue, const std::vector<bool>& inlined,
                                                         int operand) {
  const Node& a = g.node(operand);
  if (a.rank() < 2 || prologue.outputs != std::vector<int>{operand}) return std::nullopt;
  StatusOr<Kernel> k = LowerGroup(g, prologue, inlined);
  if (!k.ok() || k->stores.size() != 1 || k->inner != 1 || !k->reductions.empty()) return std::nullopt;
  const ScalarValue& v = k->values[k->stores[0].value];
  if (v.kind != ScalarValue::Kind::kLoad || k->buffers[v.buffer].dtype != a.dtype) return std::nullopt;
  const int64_t rows = a.shape[a.rank() - 2], cols = a.shape.back();
  const int64_t batch = NumElements(a.shape) / std::max<int64_t>(1, rows * cols);
  if (rows * cols * batch == 0) return std::nullopt;
  // The load's flat index over the operand's flat one (variable 0), in (batch 1, row 2, column 3).
  const Index flat = IndexAdd(IndexAdd(IndexMul(IndexVar(1, batch), rows * cols), IndexMul(IndexVar(2, rows), cols)), IndexVar(3, cols));
  const Index storage = SubstituteVar(v.index, 0, flat);
  std::vector<LinearTerm> terms;
  int64_t offset = 0;
  if (UsesValue(storage) || !AsLinearTerms(storage, &terms, &offset)) return std::nullopt;
  int64_t stride[4] = {0, 0, 0, 0};
  for (const LinearTerm& t : terms) {
    if (t.divisor != 1 || t.coefficient <= 0 || t.var < 1 || t.var > 3 || stride[t.var] != 0) return std::nullopt;
    stride[t.var] = t.coefficient;
  }
  const int64_t extent[4] = {0, batch, rows, cols};
  for (int var = 1; var <= 3; ++var)
    if (stride[var] == 0 && extent[var] > 1) return std::nullopt;  // broadcast along it: no layout reads that
  LibraryOperandView view;
  view.node = k->buffers[v.buffer].node;
  view.offset = offset;
  view.batch_stride = stride[1];
  if (stride[3] == 1 || cols == 1) {
    view.row_stride = rows == 1 ? cols : stride[2];
    if (view.row_stride < cols) return std::nullopt;
  } else if (stride[2] == 1 || rows == 1) {
    view.transposed = true;
    view.row_stride = cols == 1 ? rows : stride[3];
    if (view.row_stride < rows) return std::nullopt;
  } else {
    return std::nullopt;  // neither rows nor columns contiguous
  }
  // 16-byte alignment of every matrix's start and rows (cuBLASLt's and the plan cache's).
  const int64_t unit = 16 / static_cast<int64_t>(DTypeSize(a.dtype));
  if (view.offset % unit != 0 || view.row_stride % unit != 0 || view.batch_stride % unit != 0) return std::nullopt;
  return view;
}

}  // namespace tilefuse
