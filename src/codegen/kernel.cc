#include "codegen/kernel.h"

#include <fmt/format.h>

#include <set>

#include "support/check.h"

namespace tilefuse {

bool PrintsSymbolically(const Kernel& kernel, const SymExpr& size, int64_t value) { return size.StandsFor(value, kernel.symbols); }

std::string KernelSizeText(const Kernel& kernel, const SymExpr& size, int64_t value) {
  return PrintsSymbolically(kernel, size, value) ? "(" + size.Print("tf_sym") + ")" : fmt::format("{}", value);
}

namespace {

// Every constant of `index` that prints as an expression is that constant at the kernel's binding.
void CheckSizes(const Kernel& kernel, const Index& index) {
  if (!index) return;
  TF_CHECK_MSG(index->size.IsConstant() || index->size.StandsFor(index->value, kernel.symbols),
               "an index constant's symbolic size is not its value");
  CheckSizes(kernel, index->a);
  CheckSizes(kernel, index->b);
}

}  // namespace

std::vector<int> PrintedSymbols(const Kernel& kernel, bool inner) {
  std::set<int> ids;
  if (PrintsSymbolically(kernel, kernel.outer_size, kernel.outer)) ids = kernel.outer_size.Symbols();
  if (inner && PrintsSymbolically(kernel, kernel.inner_size, kernel.inner)) ids.merge(kernel.inner_size.Symbols());
  auto add = [&](const Index& index) {
    CheckSizes(kernel, index);
    ids.merge(IndexSymbols(index));
  };
  for (const ScalarValue& v : kernel.values) add(v.index);
  for (const KernelStore& s : kernel.stores) add(s.index);
  return {ids.begin(), ids.end()};
}

}  // namespace tilefuse
