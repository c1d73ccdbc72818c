#include "codegen/cuda/cuda_scalar_program.h"

#include <cmath>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"
#include "codegen/kernel_rewrites.h"

namespace tilefuse {

namespace {

const char* ComparisonOperator(OpCode op) {
  switch (op) {
    case OpCode::kEqual: return "==";
    case OpCode::kLess: return "<";
    case OpCode::kLessEqual: return "<=";
    case OpCode::kGreater: return ">";
    case OpCode::kGreaterEqual: return ">=";
    default: return nullptr;
  }
}

}  // namespace

std::string CudaFastForm(const ScalarValue& v, const std::vector<std::string>& args, bool rounded_to_half, const ScalarValue* divisor) {
  bool half = IsHalf(v.dtype) || rounded_to_half;
  std::string type = ComputeType(v.dtype);
  // Comparisons as C++ comparisons, the bool converted to the result's type. The scalar
  // library's compare_ge(a, b) on doubles is a double 1.0 or 0.0 converted to float, and
  // ptxas (CUDA 13.0) miscompiles that in vectorised kernels: it reused lane 0's converted
  // flag for lane 3 (fuzz seed 400251: where(x >= 0, ...) chose wrongly in every fourth
  // element; found in the SASS, the PTX is right).
  if (const char* op = ComparisonOperator(v.op)) return fmt::format("{}({} {} {})", type, args[0], op, args[1]);
  if (v.op == OpCode::kTanh && half) return fmt::format("tf_tanh_approx({})", args[0]);
  if (v.op == OpCode::kExp && half) return fmt::format("tf_exp_fast({})", args[0]);
  if (v.op == OpCode::kSigmoid && half) return fmt::format("tf_sigmoid_fast({})", args[0]);
  // Exact f32 quotients by a constant (a quantizer's x / scale, which a rounding reads): the
  // reciprocal's product corrected once (tf_div_by_constant says where it is IEEE's quotient),
  // as cheap as the approximate quotient below and exact.
  if (v.op == OpCode::kDiv && v.dtype == DType::kF32 && divisor && divisor->kind == ScalarValue::Kind::kConstant) {
    const float c = static_cast<float>(divisor->constant);
    if (std::isfinite(c) && std::fabs(c) >= 0x1p-24f && std::fabs(c) <= 0x1p24f)
      return fmt::format("tf_div_by_constant({}, {}, float({:.17g}))", args[0], args[1], static_cast<double>(1.0f / c));
  }
  // Half results keep 8 or 11 bits: the approximate quotient (2 ulp of f32) is exact enough,
  // and IEEE division's subroutine was a fifth of an erf GELU epilogue's instructions.
  if (v.op == OpCode::kDiv && half) return fmt::format("__fdividef({}, {})", args[0], args[1]);
  return "";
}

namespace {

// The ops a value may pass through on its way to a half-type cast and stay rounded by it:
// arithmetic whose relative error stays about that of its arguments. Not sums and
// differences, which cancellation can make ever less precise (1 + tanh(u) near -1), nor
// comparisons, whose outcome an ulp could flip; stores, reductions and indexes read the
// value itself.
bool KeepsRelativeError(OpCode op) {
  switch (op) {
    case OpCode::kMul: case OpCode::kDiv: case OpCode::kNeg: case OpCode::kExp: case OpCode::kTanh: case OpCode::kSigmoid:
      return true;
    default:
      return false;
  }
}

void MarkIndexValues(const Index& index, std::vector<bool>& marked) {
  if (!index) return;
  if (index->kind == IndexExpr::Kind::kValue && index->value >= 0 && static_cast<size_t>(index->value) < marked.size())
    marked[index->value] = true;
  MarkIndexValues(index->a, marked);
  MarkIndexValues(index->b, marked);
}

void MarkNeeded(const Kernel& k, int v, std::vector<bool>& needed, const std::map<int, std::string>& given);

void MarkIndexNeeded(const Kernel& k, const Index& index, std::vector<bool>& needed, const std::map<int, std::string>& given) {
  if (!index) return;
  if (index->kind == IndexExpr::Kind::kValue) MarkNeeded(k, static_cast<int>(index->value), needed, given);
  MarkIndexNeeded(k, index->a, needed, given);
  MarkIndexNeeded(k, index->b, needed, given);
}

void MarkNeeded(const Kernel& k, int v, std::vector<bool>& needed, const std::map<int, std::string>& given) {
  if (needed[v]) return;
  needed[v] = true;
  if (given.count(v)) return;
  for (int a : k.values[v].args) MarkNeeded(k, a, needed, given);
  MarkIndexNeeded(k, k.values[v].index, needed, given);
}

// A value that is not an op: loads read the buffer through the device library's converter.
std::string LeafExpression(const ScalarValue& v, const std::vector<std::string>& vars) {
  if (v.kind == ScalarValue::Kind::kLoad) return fmt::format("tf_cvt_{}(b{}[{}])", DTypeName(v.dtype), v.buffer, PrintIndex(v.index, vars));
  return CppValueExpression(v, vars);
}

}  // namespace

std::vector<bool> RoundedToHalfValues(const Kernel& k, const std::vector<int>& read_by_caller) {
  const size_t n = k.values.size();
  std::vector<bool> read_otherwise(n, false);  // by a store, a reduction, an index or the caller
  auto mark = [&](int v) {
    if (v >= 0 && static_cast<size_t>(v) < n) read_otherwise[v] = true;
  };
  for (const KernelStore& store : k.stores) {
    mark(store.value);
    MarkIndexValues(store.index, read_otherwise);
  }
  for (const KernelReduction& r : k.reductions) mark(r.value);
  for (int v : read_by_caller) mark(v);
  for (const ScalarValue& v : k.values) MarkIndexValues(v.index, read_otherwise);
  std::vector<std::vector<int>> users(n);
  for (size_t u = 0; u < n; ++u)
    for (int a : k.values[u].args) users[a].push_back(static_cast<int>(u));
  std::vector<bool> rounded(n, false);
  for (size_t id = n; id-- > 0;) {  // users follow their arguments
    if (read_otherwise[id] || users[id].empty() || k.values[id].kind != ScalarValue::Kind::kOp) continue;
    rounded[id] = std::all_of(users[id].begin(), users[id].end(), [&](int u) {
      const ScalarValue& use = k.values[u];
      if (use.kind != ScalarValue::Kind::kOp) return false;
      return (use.op == OpCode::kCast && (IsHalf(use.dtype) || IsFloat8(use.dtype))) || (KeepsRelativeError(use.op) && rounded[u]);
    });
  }
  return rounded;
}

// The argument t of 1 + erf(t) (either order; erf GELU's sum), an f32 value: its id, else -1.
int OnePlusErfArgument(const Kernel& k, const ScalarValue& v) {
  if (v.kind != ScalarValue::Kind::kOp || v.op != OpCode::kAdd || v.dtype != DType::kF32 || v.args.size() != 2) return -1;
  for (int i = 0; i < 2; ++i) {
    const ScalarValue &one = k.values[v.args[i]], &erf = k.values[v.args[1 - i]];
    if (one.kind == ScalarValue::Kind::kConstant && one.constant == 1.0 && erf.kind == ScalarValue::Kind::kOp &&
        erf.op == OpCode::kErf && erf.dtype == DType::kF32)
      return erf.args[0];
  }
  return -1;
}

const char* TileElementType(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "tf::Bf16";
    case DType::kF16: return "tf::F16";
    case DType::kF8E4M3: return "tf::E4m3";
    case DType::kF8E5M2: return "tf::E5m2";
    case DType::kI8: return "tf::S8";
    default: return "tf::F32";
  }
}

std::string CudaElementProgram(const Kernel& original, const std::vector<int>& roots, const std::map<int, std::string>& given,
                               const std::vector<std::string>& vars, const std::string& indent) {
  std::vector<int> new_id;
  const Kernel k = RewriteForEmission(original, {.integer_powers = true, .row_invariant_divisors = false}, &new_id);
  std::vector<int> original_id(k.values.size(), -1);  // -1: added by the rewrite
  for (size_t v = 0; v < new_id.size(); ++v) original_id[new_id[v]] = static_cast<int>(v);
  auto name = [&](int id) { return original_id[id] >= 0 ? fmt::format("v{}", original_id[id]) : fmt::format("t{}", id); };
  std::map<int, std::string> given_here;
  for (const auto& [v, expression] : given) given_here[new_id[v]] = expression;
  std::vector<bool> needed(k.values.size(), false);
  for (int r : roots) MarkNeeded(k, new_id[r], needed, given_here);
  std::vector<int> read_by_caller;  // the roots, in the rewritten program's ids
  for (int r : roots) read_by_caller.push_back(new_id[r]);
  const std::vector<bool> rounded_to_half = RoundedToHalfValues(k, read_by_caller);
  std::string out;
  for (size_t id = 0; id < k.values.size(); ++id) {  // SSA: arguments precede their users
    if (!needed[id]) continue;
    const ScalarValue& v = k.values[id];
    std::string rhs;
    if (auto it = given_here.find(static_cast<int>(id)); it != given_here.end()) {
      rhs = it->second;
    } else if (v.kind != ScalarValue::Kind::kOp) {
      // As in `original`, whose ids the index's gathered values are named by.
      rhs = LeafExpression(original.values[original_id[id]], vars);
    } else {
      std::vector<std::string> args;
      for (int a : v.args) args.push_back(name(a));
      // 1 + erf(t) rounded to a half type: tf_one_plus_erf_fast, more exact than the sum (the
      // erf, read by nothing else then, is left to the compiler to drop).
      if (const int t = OnePlusErfArgument(k, v); t >= 0 && rounded_to_half[id]) rhs = fmt::format("tf_one_plus_erf_fast({})", name(t));
      else if (v.op != OpCode::kCast) rhs = CudaFastForm(v, args, rounded_to_half[id], v.args.size() == 2 ? &k.values[v.args[1]] : nullptr);
      if (rhs.empty()) rhs = CppOpExpression(v, args);
    }
    out += fmt::format("{}const {} {} = {};\n", indent, ComputeType(v.dtype), name(static_cast<int>(id)), rhs);
  }
  return out;
}

}  // namespace tilefuse
