#include "codegen/kernel.h"

#include <fmt/format.h>

#include <set>

#include "support/check.h"

namespace tilefuse {

bool PrintsSymbolically(const Kernel& kernel, const SymExpr& size, int64_t value) {
  if (size.IsConstant()) return false;
  const std::set<int> ids = size.Symbols();
  return *ids.rbegin() < static_cast<int>(kernel.symbols.size()) && size.Evaluate(kernel.symbols) == value;
}

std::string KernelSizeText(const Kernel& kernel, const SymExpr& size, int64_t value) {
  return PrintsSymbolically(kernel, size, value) ? "(" + size.Print("tf_sym") + ")" : fmt::format("{}", value);
}

namespace {

// Every constant of `index` that prints as an expression is that constant at the kernel's binding.
void CheckSizes(const Kernel& kernel, const Index& index) {
  if (!index) return;
  if (!index->size.IsConstant()) {
    const std::set<int> ids = index->size.Symbols();
    TF_CHECK_MSG(*ids.rbegin() < static_cast<int>(kernel.symbols.size()) && index->size.Evaluate(kernel.symbols) == index->value,
                 "an index constant's symbolic size is not its value");
  }
  CheckSizes(kernel, index->a);
  CheckSizes(kernel, index->b);
}

}  // namespace

std::vector<int> PrintedSymbols(const Kernel& kernel) {
  std::set<int> ids;
  if (PrintsSymbolically(kernel, kernel.outer_size, kernel.outer)) ids = kernel.outer_size.Symbols();
  auto add = [&](const Index& index) {
    CheckSizes(kernel, index);
    ids.merge(IndexSymbols(index));
  };
  for (const ScalarValue& v : kernel.values) add(v.index);
  for (const KernelStore& s : kernel.stores) add(s.index);
  return {ids.begin(), ids.end()};
}

}  // namespace tilefuse
