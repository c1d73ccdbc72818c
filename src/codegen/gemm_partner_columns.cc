#include "codegen/gemm_partner_columns.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

namespace tilefuse {

namespace {

using Kind = ScalarValue::Kind;

// The value of `v` at the loop position `vars` where it depends on nothing but the loop
// variables and constants through comparisons, logic, selects and integer arithmetic (a
// concat's position test); nullopt otherwise. `known` holds the values before v.
std::optional<double> KnownValue(const Kernel& k, int v, const std::vector<int64_t>& vars, const std::vector<std::optional<double>>& known) {
  const ScalarValue& s = k.values[v];
  if (s.kind == Kind::kConstant) return s.constant;
  if (s.kind == Kind::kIndex) {
    std::optional<int64_t> i = EvaluateIndex(s.index, vars);
    return i ? std::optional<double>(static_cast<double>(*i)) : std::nullopt;
  }
  if (s.kind != Kind::kOp) return std::nullopt;
  std::vector<double> a;
  for (int arg : s.args) {
    if (!known[arg]) return std::nullopt;
    a.push_back(*known[arg]);
  }
  switch (s.op) {
    case OpCode::kLess: return a[0] < a[1];
    case OpCode::kLessEqual: return a[0] <= a[1];
    case OpCode::kGreater: return a[0] > a[1];
    case OpCode::kGreaterEqual: return a[0] >= a[1];
    case OpCode::kEqual: return a[0] == a[1];
    case OpCode::kAnd: return a[0] != 0 && a[1] != 0;
    case OpCode::kOr: return a[0] != 0 || a[1] != 0;
    case OpCode::kNot: return a[0] == 0;
    case OpCode::kWhere: return a[0] != 0 ? a[1] : a[2];
    case OpCode::kAdd: return a[0] + a[1];
    case OpCode::kSub: return a[0] - a[1];
    default: return std::nullopt;
  }
}

// Which values a store's value depends on at the loop position `vars`: a select whose
// condition is known there depends on the input it keeps only.
std::vector<char> LiveValues(const Kernel& k, const std::vector<int64_t>& vars) {
  std::vector<std::optional<double>> known(k.values.size());
  for (size_t v = 0; v < k.values.size(); ++v) known[v] = KnownValue(k, static_cast<int>(v), vars, known);
  std::vector<char> live(k.values.size(), 0);
  for (const KernelStore& st : k.stores) live[st.value] = 1;
  for (size_t v = k.values.size(); v-- > 0;) {
    const ScalarValue& s = k.values[v];
    if (!live[v] || s.kind != Kind::kOp) continue;
    if (s.op == OpCode::kWhere && known[s.args[0]]) {
      live[s.args[0]] = 1;
      live[*known[s.args[0]] != 0 ? s.args[1] : s.args[2]] = 1;
      continue;
    }
    for (int arg : s.args) live[arg] = 1;
  }
  return live;
}

}  // namespace

StatusOr<PartnerColumns> FindPartnerColumns(const Kernel& epilogue, int64_t rows, int64_t n, const std::vector<int>& shifted) {
  PartnerColumns found;
  found.loads = shifted;
  if (rows < 1 || n < 1) return found;
  std::vector<int64_t> sample_rows = {0, rows / 2, rows - 1};
  sample_rows.erase(std::unique(sample_rows.begin(), sample_rows.end()), sample_rows.end());
  for (int64_t row : sample_rows)
    for (int64_t col = 0; col < n; ++col) {
      const std::vector<int64_t> vars = {row, col};
      const std::vector<char> live = LiveValues(epilogue, vars);
      for (int v : shifted) {
        if (!live[v]) continue;
        std::optional<int64_t> at = EvaluateIndex(epilogue.values[v].index, vars);
        const int64_t read = at ? *at - row * n : -1;
        if (!at || read < 0 || read >= n || read == col)
          return Unimplemented("the epilogue reads the product through a view other than a rotated half (column c XOR a power of two)");
        if (found.distance == 0) found.distance = read ^ col;
        if ((read ^ col) != found.distance)
          return Unimplemented(fmt::format("the epilogue reads the product at column c XOR {} and XOR {}: one partner column only",
                                           found.distance, read ^ col));
      }
    }
  const int64_t p = found.distance;
  if (p == 0) return found;  // the shifted loads are never used
  if (p % 8 != 0 || (p & (p - 1)) != 0 || n % (2 * p) != 0)
    return Unimplemented(fmt::format("the epilogue reads column c XOR {}: a partner column needs a power of two, a multiple of 8, that "
                                     "halves whole blocks of N = {}",
                                     p, n));
  return found;
}

}  // namespace tilefuse
