#include "ir/scalar_eval.h"

#include "ir/scalar_library.h"

namespace tilefuse {

double EvaluateScalarOp(OpCode op, [[maybe_unused]] double a, [[maybe_unused]] double b, [[maybe_unused]] double c) {
  using namespace tilefuse::scalar;
  switch (op) {
#define TF_OP(Enum, name, arity, kind, result, expr) \
  case OpCode::k##Enum:                              \
    return static_cast<double>(expr);
#include "tilefuse/ops.def"
#undef TF_OP
  }
  return 0;
}

}  // namespace tilefuse
