// What each reduction of ops.def computes, from its TF_REDUCTION row: the value it starts
// from, the pointwise op that folds two partial results, and whether a mean's division
// finishes it. The reference interpreter folds with these and both emitters print them,
// so the three agree by construction (max and min propagate NaN as max_nan and min_nan).
#pragma once

#include "tilefuse/graph.h"

namespace tilefuse {

struct ReductionTraits {
  double identity = 0;             // the result of reducing nothing
  OpCode combiner = OpCode::kAdd;  // a binary pointwise op: acc = combiner(acc, element)
  bool divides_by_count = false;   // finished as the fold divided by the elements reduced
};

// The row of reduction `op`; a CHECK failure for an op that is not a reduction.
const ReductionTraits& GetReductionTraits(OpCode op);

}  // namespace tilefuse
