#include "codegen/cuda_scalar_program.h"

#include <fmt/format.h>

#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"

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

std::string CudaFastForm(const Kernel& k, const ScalarValue& v, const std::vector<std::string>& args, bool invariant_divisor) {
  bool half = v.dtype == DType::kF16 || v.dtype == DType::kBF16;
  std::string type = ComputeType(v.dtype);
  if (v.op == OpCode::kPow && IsFloat(v.dtype)) {
    const ScalarValue& e = k.values[v.args[1]];
    if (e.kind == ScalarValue::Kind::kConstant && e.constant == 2) return fmt::format("{0}({1} * {1})", type, args[0]);
    if (e.kind == ScalarValue::Kind::kConstant && e.constant == 3) return fmt::format("{0}({1} * {1} * {1})", type, args[0]);
  }
  // Comparisons as C++ comparisons, the bool converted to the result's type. The scalar
  // library's compare_ge(a, b) on doubles is a double 1.0 or 0.0 converted to float, and
  // ptxas (CUDA 13.0) miscompiles that in vectorised kernels: it reused lane 0's converted
  // flag for lane 3 (fuzz seed 400251: where(x >= 0, ...) chose wrongly in every fourth
  // element; found in the SASS, the PTX is right).
  if (const char* op = ComparisonOperator(v.op)) return fmt::format("{}({} {} {})", type, args[0], op, args[1]);
  if (v.op == OpCode::kTanh && half) return fmt::format("tf_tanh_approx({})", args[0]);
  if (v.op == OpCode::kExp && half) return fmt::format("tf_exp_fast({})", args[0]);
  if (v.op == OpCode::kDiv && IsFloat(v.dtype) && invariant_divisor)
    return fmt::format("{0}({1} * ({0}(1) / {2}))", type, args[0], args[1]);
  return "";
}

namespace {

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

}  // namespace

std::string CudaElementProgram(const Kernel& k, const std::vector<int>& roots, const std::map<int, std::string>& given,
                               const std::vector<std::string>& vars, const std::string& indent) {
  std::vector<bool> needed(k.values.size(), false);
  for (int r : roots) MarkNeeded(k, r, needed, given);
  std::string out;
  for (size_t id = 0; id < k.values.size(); ++id) {  // SSA: arguments precede their users
    if (!needed[id]) continue;
    const ScalarValue& v = k.values[id];
    std::string rhs;
    if (auto it = given.find(static_cast<int>(id)); it != given.end()) {
      rhs = it->second;
    } else if (v.kind == ScalarValue::Kind::kLoad) {
      rhs = fmt::format("tf_cvt_{}(b{}[{}])", DTypeName(v.dtype), v.buffer, PrintIndex(v.index, vars));
    } else {
      std::vector<std::string> args;
      for (int a : v.args) args.push_back(fmt::format("v{}", a));
      if (v.kind == ScalarValue::Kind::kOp && v.op != OpCode::kCast) rhs = CudaFastForm(k, v, args, false);
      if (rhs.empty()) rhs = CppValueExpression(v, vars);
    }
    out += fmt::format("{}const {} v{} = {};\n", indent, ComputeType(v.dtype), id, rhs);
  }
  return out;
}

}  // namespace tilefuse
