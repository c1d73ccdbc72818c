// One pointwise op of ops.def evaluated on doubles, by the op's own scalar expression (the
// reference interpreter's semantics): for code that asks what a scalar program computes
// without running a graph. Operands an op does not have are ignored.
#pragma once

#include "tilefuse/graph.h"

namespace tilefuse {

double EvaluateScalarOp(OpCode op, double a, double b = 0, double c = 0);

}  // namespace tilefuse
