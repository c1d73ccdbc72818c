// The C++ text of one scalar SSA value of a Kernel, shared by the loop emitter and the
// templates (attention) that print a scalar program inside their own loops.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

// The right-hand side computing `value` (of type ComputeType(value.dtype)): arguments
// are named v<id>, buffers b<id>, loop variables `var_names`. Accumulators have no
// expression (their loop defines them): "".
std::string CppValueExpression(const ScalarValue& value, const std::vector<std::string>& var_names);
// The same for an op value whose arguments are named `args`.
std::string CppOpExpression(const ScalarValue& op, const std::vector<std::string>& args);

}  // namespace tilefuse
