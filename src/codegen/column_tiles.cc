#include "codegen/column_tiles.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/emit_util.h"
#include "codegen/transposed_tiles.h"

namespace tilefuse {

namespace {

// Σ coefficient · coordinate over the row dims, as an index of i1: adjacent dims the load
// reads as one (the outer coefficient is the inner one times its extent) are one term, so the
// usual pooled plane (h, w read as h·W + w) costs a multiplication and no division.
Index RowOffset(const std::vector<int64_t>& dims, const std::vector<int64_t>& coefficients, int64_t inner) {
  Index offset = IndexConst(0);
  int64_t stride = 1;  // of the group's innermost dim
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0;) {
    int64_t extent = dims[d];
    int outer = d;
    while (outer > 0 && coefficients[outer - 1] == coefficients[outer] * dims[outer]) extent *= dims[--outer];
    if (coefficients[d] != 0) {
      Index coordinate = IndexMod(IndexDiv(IndexVar(1, inner), stride), extent);
      offset = IndexAdd(offset, IndexMul(coordinate, coefficients[d]));
    }
    stride *= extent;
    d = outer - 1;
  }
  return offset;
}

struct CoordinateLoad {
  int value = -1;
  std::vector<int64_t> coefficients;  // output dims, then row dims
  int64_t offset = 0;
};

// Every load reading both loop variables, in coordinates; why_not when one is not affine in them.
std::vector<CoordinateLoad> RowDataLoads(const Kernel& k, const ColumnTiling& t, std::string* why_not) {
  const size_t outputs = t.output_dims.size();
  const Index flat_output = FlatFromCoordinates(t.output_dims);
  const Index flat_row = FlatFromCoordinates(t.row_dims, kCoordinateVar + static_cast<int>(outputs));
  std::vector<CoordinateLoad> loads;
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    // Per reduced element and per output (a gather's index may carry i1 as a value).
    if (value.kind != ScalarValue::Kind::kLoad || !value.inner || !UsesVar(value.index, 0)) continue;
    CoordinateLoad l{static_cast<int>(v), {}, 0};
    const Index placed = SubstituteVar(SubstituteVar(value.index, 0, flat_output), 1, flat_row);
    if (UsesValue(value.index)) {
      *why_not = fmt::format("v{} reads a gathered index", v);
      return {};
    }
    if (!CoordinateCoefficients(placed, outputs + t.row_dims.size(), &l.coefficients, &l.offset)) {
      *why_not = fmt::format("v{} reads a clamped or otherwise non-affine index", v);
      return {};
    }
    loads.push_back(std::move(l));
  }
  return loads;
}

// The widest vector, 16 bytes of the narrowest contiguous load at most, that keeps every
// contiguous load's accesses aligned and within one run of `columns` outputs.
int WidestVector(const Kernel& k, const ColumnTiling& t, const std::vector<CoordinateLoad>& contiguous) {
  int narrowest = 16;
  for (const CoordinateLoad& l : contiguous) narrowest = std::min(narrowest, DTypeSize(k.values[l.value].dtype));
  const size_t column_dim = t.output_dims.size() - 1;
  auto aligned = [&](int vector) {
    if (t.columns % vector != 0) return false;
    for (const CoordinateLoad& l : contiguous) {
      if (l.offset % vector != 0) return false;
      for (size_t d = 0; d < l.coefficients.size(); ++d)
        if (d != column_dim && l.coefficients[d] % vector != 0) return false;
    }
    return true;
  };
  int vector = std::max(1, 16 / narrowest);
  while (vector > 1 && !aligned(vector)) vector /= 2;
  return vector;
}

}  // namespace

ColumnTiling FindColumnTiling(const Kernel& k) {
  ColumnTiling t;
  auto refuse = [&](std::string why) {
    t.why_not = std::move(why);
    return t;
  };
  if (k.reductions.empty() || k.inner <= 1) return refuse("not a reduction kernel");
  for (const KernelReduction& r : k.reductions)
    if (std::string(ComputeType(r.dtype)) != "float") return refuse(fmt::format("a {} reduction (the template accumulates in f32)", DTypeName(r.dtype)));
  for (const KernelStore& s : k.stores)
    if (UsesVar(s.index, 1)) return refuse("stores per reduced element (the row template broadcasts the results back over the row)");
  if (k.outer >= (int64_t{1} << 30)) return refuse("more outputs than one launch's blocks cover (no grid-stride loop)");
  t.output_dims = DimsFromCuts(k, 0, k.outer);
  t.row_dims = DimsFromCuts(k, 1, k.inner);
  if (t.output_dims.empty() || t.row_dims.empty())
    return refuse(k.outer == 1 ? "one output" : "the indices split the outputs or the reduced elements in ways that do not nest");
  t.columns = t.output_dims.back();
  std::string why;
  std::vector<CoordinateLoad> loads = RowDataLoads(k, t, &why);
  if (!why.empty()) return refuse(why);
  const size_t column_dim = t.output_dims.size() - 1, row_dim = column_dim + t.row_dims.size();
  std::vector<CoordinateLoad> contiguous;
  for (const CoordinateLoad& l : loads) {
    if (l.coefficients[row_dim] == 1) return refuse(fmt::format("v{} reads the reduced elements contiguously (a row reduction)", l.value));
    if (l.coefficients[column_dim] == 1) contiguous.push_back(l);
  }
  if (contiguous.empty()) return refuse("no load reads consecutive outputs at consecutive addresses");
  t.vector = WidestVector(k, t, contiguous);
  for (const CoordinateLoad& l : contiguous) {
    const std::vector<int64_t> row_coefficients(l.coefficients.begin() + static_cast<std::ptrdiff_t>(column_dim) + 1, l.coefficients.end());
    t.loads.push_back({l.value, SubstituteVar(k.values[l.value].index, 1, IndexConst(0)), RowOffset(t.row_dims, row_coefficients, k.inner)});
  }
  std::vector<int> reduced;
  for (const KernelReduction& r : k.reductions) reduced.push_back(r.value);
  const std::vector<bool> needed = ValuesNeeded(k, reduced);
  for (size_t v = 0; v < k.values.size(); ++v) t.chained = t.chained || (needed[v] && k.values[v].kind == ScalarValue::Kind::kAccumulator);
  return t;
}

std::vector<bool> ValuesNeeded(const Kernel& k, const std::vector<int>& roots) {
  std::vector<bool> needed(k.values.size(), false);
  std::vector<int> stack = roots;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (needed[v]) continue;
    needed[v] = true;
    const ScalarValue& value = k.values[v];
    stack.insert(stack.end(), value.args.begin(), value.args.end());
    std::vector<const IndexExpr*> indices = {value.index.get()};
    while (!indices.empty()) {
      const IndexExpr* e = indices.back();
      indices.pop_back();
      if (!e) continue;
      if (e->kind == IndexExpr::Kind::kValue) stack.push_back(static_cast<int>(e->value));
      indices.push_back(e->a.get());
      indices.push_back(e->b.get());
    }
  }
  return needed;
}

}  // namespace tilefuse
