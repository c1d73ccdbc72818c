#include "codegen/split_rows.h"

namespace tilefuse {

namespace {

// The smallest c of any i0 / c or i0 % c in the index (0: none).
int64_t SmallestDivisorOfVar0(const Index& index) {
  if (!index) return 0;
  int64_t c = 0;
  if ((index->kind == IndexExpr::Kind::kDiv || index->kind == IndexExpr::Kind::kMod) && index->a->kind == IndexExpr::Kind::kVar &&
      index->a->value == 0)
    c = index->b->value;
  for (int64_t sub : {SmallestDivisorOfVar0(index->a), SmallestDivisorOfVar0(index->b)})
    if (sub > 0 && (c == 0 || sub < c)) c = sub;
  return c;
}

bool ReadsInnerValue(const Index& index, const std::vector<ScalarValue>& values) {
  if (!index) return false;
  if (index->kind == IndexExpr::Kind::kValue && values[static_cast<size_t>(index->value)].inner) return true;
  return ReadsInnerValue(index->a, values) || ReadsInnerValue(index->b, values);
}

}  // namespace

Kernel SplitPointwiseRows(Kernel k, int64_t min_row) {
  if (!k.reductions.empty() || k.inner != 1) return k;
  int64_t row = 0;
  auto consider = [&](const Index& index) {
    int64_t c = SmallestDivisorOfVar0(index);
    if (c > 0 && (row == 0 || c < row)) row = c;
  };
  for (const ScalarValue& v : k.values) consider(v.index);
  for (const KernelStore& s : k.stores) consider(s.index);
  if (row < min_row || row >= k.outer || k.outer % row != 0) return k;

  const Index flat = IndexAdd(IndexMul(IndexVar(0, k.outer / row), row), IndexVar(1, row));
  for (ScalarValue& v : k.values) {
    if (v.index) v.index = SubstituteVar(v.index, 0, flat);
    if (v.kind == ScalarValue::Kind::kOp) {
      v.inner = false;
      for (int arg : v.args) v.inner = v.inner || k.values[static_cast<size_t>(arg)].inner;
    } else {
      v.inner = v.index && (UsesVar(v.index, 1) || ReadsInnerValue(v.index, k.values));
    }
  }
  for (KernelStore& s : k.stores) s.index = SubstituteVar(s.index, 0, flat);
  k.outer /= row;
  k.inner = row;
  // The rows in the model's symbols: the flat loop's size over the row's (a constant).
  if (!k.symbols.empty()) {
    k.outer_size = k.outer_size.DividedBy(SymExpr::Constant(row)).value_or(SymExpr::Constant(k.outer));
    k.inner_size = SymExpr::Constant(row);
  }
  return k;
}

}  // namespace tilefuse
