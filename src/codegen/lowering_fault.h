// A deliberately wrong lowering, for the tests that prove the differential fuzzer
// (testing/differential_fuzz.h) fails on a lowering bug rather than explaining it away
// as ill-conditioning. Never set outside tests.
#pragma once

#include <optional>

#include "tilefuse/graph.h"

namespace tilefuse {

struct LoweringFault {
  // Every float result of this op in a generated loop kernel (LowerGroup) is scaled by
  // 1 + relative_error; none: lower correctly.
  std::optional<OpCode> op;
  double relative_error = 1e-3;
};

}  // namespace tilefuse
