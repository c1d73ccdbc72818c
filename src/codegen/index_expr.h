// Integer index expressions over a kernel's loop variables. Views (reshape, transpose,
// slice, broadcast) fold into loads as index arithmetic built from these; the
// simplifier knows each variable's range, so the common reshape patterns —
// (r*L + j) / L → r, (r*L + j) % L → j — cost nothing in the generated loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/symbolic_shapes.h"

namespace tilefuse {

struct IndexExpr;
using Index = std::shared_ptr<const IndexExpr>;

struct IndexExpr {
  enum class Kind { kConst, kVar, kValue, kAdd, kMul, kDiv, kMod, kClamp };
  Kind kind;
  int64_t value = 0;  // kConst: the constant; kVar: loop variable id; kValue: SSA value id; kClamp: lower bound
  Index a, b;
  // Inclusive bounds proven for this expression (kValue: unknown, wide).
  int64_t min = 0, max = 0;
  // kConst: what the constant is in the model's symbolic dims (a dim's size, a stride: B·T·768),
  // where it is not a constant; printed as that expression (ir/symbolic_shapes.h). The
  // simplifier decides on values, at the graph's binding, and carries the expressions along
  // where its arithmetic on them is exact.
  SymExpr size;
};

// Loop variable `id` ranging over [0, extent).
Index IndexVar(int id, int64_t extent);
Index IndexConst(int64_t value);
// The constant `value`, which is `size` in the model's symbols (IndexConst where `size` is a constant).
Index IndexSize(int64_t value, const SymExpr& size);
// An integer SSA value of the scalar program (a gather index), assumed in [lo, hi].
Index IndexValue(int value_id, int64_t lo, int64_t hi);
// Simplifying constructors.
Index IndexAdd(const Index& a, const Index& b);
Index IndexMul(const Index& a, int64_t c);
Index IndexDiv(const Index& a, int64_t c);  // floor division, c > 0, a >= 0
Index IndexMod(const Index& a, int64_t c);  // c > 0, a >= 0
// The same by a constant expression (IndexConst, IndexSize).
Index IndexMul(const Index& a, const Index& c);
Index IndexDiv(const Index& a, const Index& c);
Index IndexMod(const Index& a, const Index& c);
// min(max(a, lo), hi): keeps loads of not-selected concat inputs and gathers in bounds.
Index IndexClamp(const Index& a, int64_t lo, int64_t hi);
Index IndexClamp(const Index& a, int64_t lo, const Index& hi);
// Does the expression use loop variable `id`?
bool UsesVar(const Index& a, int id);

// Flat row-major offset of a multi-index in `shape` (whose dims are `sizes` in the model's
// symbols, where given).
Index Ravel(const std::vector<Index>& multi, const std::vector<int64_t>& shape, const std::vector<SymExpr>* sizes = nullptr);
// Multi-index of a flat row-major offset in `shape`.
std::vector<Index> Unravel(const Index& flat, const std::vector<int64_t>& shape, const std::vector<SymExpr>* sizes = nullptr);
// The symbols the expression's constants are printed with.
std::set<int> IndexSymbols(const Index& index);

// C expression text: variables print as `var_names[id]`, values as `v<id>`.
std::string PrintIndex(const Index& index, const std::vector<std::string>& var_names);
bool SameIndex(const Index& a, const Index& b);

}  // namespace tilefuse

namespace tilefuse {

// c0·var0 + c1·var1 + offset, when an index is that simple (no division, modulo, clamp or
// gathered value). The CUDA emitter vectorises accesses whose c1 (rows) or c0 (pointwise) is 1.
struct AffineIndex {
  int64_t c0 = 0, c1 = 0, offset = 0;
};
bool AsAffine(const Index& index, AffineIndex* out);
// Does the expression read an SSA value (a gather index)?
bool UsesValue(const Index& index);

// offset + Σ coefficient·(var / divisor): the form a strided view's index takes once the
// loop variables are the view's own coordinates (how TMA addresses a tensor: one
// dimension per term). Divisions and remainders of sums fold where the variables' ranges
// prove it ((x·256 + y·64 + c) / 256 = x with y·64 + c < 256); terms on the same (var,
// divisor) are merged; false for anything else (a clamp, a gathered value, a remainder
// that does not fold).
struct LinearTerm {
  int var = 0;
  int64_t divisor = 1;
  int64_t coefficient = 0;
  int64_t var_max = 0;  // the variable's largest value
};
bool AsLinearTerms(const Index& index, std::vector<LinearTerm>* terms, int64_t* offset);

}  // namespace tilefuse

namespace tilefuse {

// `index` with loop variable `id` replaced by `replacement`, rebuilt through the
// simplifying constructors (so (r*L + j) % L still folds to j afterwards).
Index SubstituteVar(const Index& index, int id, const Index& replacement);

// The value of `index` with loop variable i at vars[i]; nullopt where it reads an SSA value
// (a gathered index) or a variable past `vars`.
std::optional<int64_t> EvaluateIndex(const Index& index, const std::vector<int64_t>& vars);

}  // namespace tilefuse
