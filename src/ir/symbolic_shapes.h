// What each node's dims are in the model's symbolic dims (batch, seq): an analysis over a
// graph whose shapes are bound (every dim has its value) and whose inputs say which dims
// were symbols (Graph::symbolic_inputs).
//
// Shapes stay concrete, so the passes, the planner and the cost model work as before, at the
// binding's values. What this adds is provenance: dim 0 of a [B·T, 768] product is B·T, not
// just 48. Code generation prints such a size as an expression over kernel parameters
// (tf_sym0 * tf_sym1) instead of its value, so the kernel's text — and its compiled binary
// in the cache — is the same for every binding that makes the same code decisions.
//
// Soundness never rests on this analysis: an expression is only used where it evaluates to
// the concrete dim at the graph's binding (else the dim is a constant), and a kernel is
// generated at each binding and reused only when its text is identical. A wrong guess of
// provenance (a static 24 taken for seq = 24) costs a compile at the next binding, never a
// wrong result.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tilefuse/graph.h"

namespace tilefuse {

// A size as a polynomial with integer coefficients over symbols (Σ c · Π symbol): the form a
// dim takes when reshapes merge, split and concatenate symbolic dims (B·T·12, T + 1).
class SymExpr {
 public:
  SymExpr() = default;  // 0
  static SymExpr Constant(int64_t value);
  static SymExpr Symbol(int id);

  bool IsConstant() const;
  SymExpr operator+(const SymExpr& other) const;
  SymExpr operator-(const SymExpr& other) const;
  SymExpr operator*(const SymExpr& other) const;
  // The exact quotient, when `divisor` is a single term (c · Π symbol) that divides every
  // term; nullopt otherwise.
  std::optional<SymExpr> DividedBy(const SymExpr& divisor) const;
  // The value with symbol i at values[i] (CHECKs every symbol has one).
  int64_t Evaluate(const std::vector<int64_t>& values) const;
  // C text over parameters named `prefix`<id>: "tf_sym0 * tf_sym1 * 768", "tf_sym1 + 1".
  std::string Print(const std::string& prefix) const;
  // Readable, with the symbols' names: "batch * sequence * 768".
  std::string Print(const std::vector<std::string>& names) const;
  std::set<int> Symbols() const;
  // Whether this is a size of the symbols (not a constant) that is `value` where the symbols
  // have `values` (a binding): where it may be printed in its place.
  bool StandsFor(int64_t value, const std::vector<int64_t>& values) const;
  // Is this the size `value` at the symbols' `values`: a constant equal to it, or an expression
  // that StandsFor it?
  bool Is(int64_t value, const std::vector<int64_t>& values) const;
  bool operator==(const SymExpr&) const = default;

 private:
  std::string PrintNamed(const std::function<std::string(int)>& name) const;

  // Monomial (symbol ids ascending, repeated for powers) -> coefficient; no zero coefficients.
  std::map<std::vector<int>, int64_t> terms_;
};

struct SymbolicShapes {
  std::vector<std::string> names;          // the symbols by id (sorted by name)
  std::vector<int64_t> values;             // their values in the graph
  std::vector<std::vector<SymExpr>> dims;  // per node, per dim: constants where static or not known

  bool empty() const { return names.empty(); }
  // The node's element count in the symbols.
  SymExpr Elements(int node) const;
};

// Empty (no names) when the graph has no symbolic inputs.
SymbolicShapes InferSymbolicShapes(const Graph& graph);

}  // namespace tilefuse
