#include "codegen/cpp_value_expression.h"

#include <fmt/format.h>

#include "codegen/emit_util.h"

namespace tilefuse {

std::string CppValueExpression(const ScalarValue& v, const std::vector<std::string>& vars) {
  switch (v.kind) {
    case ScalarValue::Kind::kLoad:
      return fmt::format("tf_load_{}(b{}, {})", DTypeName(v.dtype), v.buffer, PrintIndex(v.index, vars));
    case ScalarValue::Kind::kConstant: return Literal(v.constant, v.dtype);
    case ScalarValue::Kind::kIndex: return fmt::format("{}({})", ComputeType(v.dtype), PrintIndex(v.index, vars));
    case ScalarValue::Kind::kRandom:
      return fmt::format("{}(tf_philox_uniform({}ull, (uint64_t)({})))", ComputeType(v.dtype), v.seed, PrintIndex(v.index, vars));
    case ScalarValue::Kind::kAccumulator: return "";
    case ScalarValue::Kind::kOp: break;
  }
  std::vector<std::string> args;
  for (int a : v.args) args.push_back(fmt::format("v{}", a));
  return CppOpExpression(v, args);
}

std::string CppOpExpression(const ScalarValue& v, const std::vector<std::string>& args) {
  if (v.op == OpCode::kCast) return fmt::format("tf_cast_{}({})", DTypeName(v.dtype), args[0]);
  std::string e = SubstituteArgs(GetOpInfo(v.op).scalar_expr, args);
  // Integer-valued results of ops on floats (comparisons) stay in the input's type;
  // convert to this value's compute type so every SSA value has one known type.
  return fmt::format("{}({})", ComputeType(v.dtype), e);
}

}  // namespace tilefuse
