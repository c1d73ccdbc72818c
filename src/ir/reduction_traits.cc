#include "ir/reduction_traits.h"

#include <cmath>

#include "support/check.h"

namespace tilefuse {

namespace {

struct ReductionRow {
  OpCode op;
  ReductionTraits traits;
};

constexpr ReductionRow kReductions[] = {
#define TF_OP(...)
#define TF_REDUCTION(Enum, identity, combiner, divides_by_count) \
  {OpCode::k##Enum, {identity, OpCode::k##combiner, divides_by_count}},
#include "tilefuse/ops.def"
#undef TF_OP
};

}  // namespace

const ReductionTraits& GetReductionTraits(OpCode op) {
  for (const ReductionRow& row : kReductions)
    if (row.op == op) return row.traits;
  TF_UNREACHABLE("not a reduction");
  return kReductions[0].traits;
}

}  // namespace tilefuse
