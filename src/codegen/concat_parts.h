// A pointwise kernel over a concat's output, cut into the concat's parts.
//
// Lowering reads every concat input at a clamped offset and selects by position (`pos <
// cut`, pos = (i0 / divisor) % (period / divisor)), so each element evaluates every part and
// the clamps make the loads scalar. When the period is a multiple of the vector width, the
// position test is the same for a whole vector: a vector loop can branch once per vector
// into its part, where i0 = q·period + lo + r (r < the part's length) and the index
// simplifier turns the clamps into identities (or constants) and the position tests into
// known answers. rotary embedding: 35% of copy before (both halves per element, 8 scalar
// loads). A cut inside a vector makes that vector a part of its own, whose elements keep their
// test (ResNet's stem im2col: K = 147 padded to 148).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

struct ConcatParts {
  int64_t period = 0;             // i0's position repeats with this period (elements)
  std::vector<int64_t> cuts;      // part boundaries inside the period, ascending: 0 = cuts[0] < ... < period
  std::vector<int> comparisons;   // the position tests (values) the parts decide
};

// The parts of pointwise kernel `kernel` for vectors of `vector` elements, or none (cuts
// empty) when it has no concat position test, the tests disagree on the period, the period is
// not a multiple of the vector width, or the kernel draws random values or gathers. A cut
// inside a vector gives that vector a part of its own (its position tests stay per element).
ConcatParts FindConcatParts(const Kernel& kernel, int vector);

// i0 inside part `part`: q·period + cuts[part] + r, with r (variable 0) below the part's
// length and q (variable 1) below kernel.outer / period.
Index PartElement(const ConcatParts& parts, int part, int64_t elements);

// What position test `value` answers for every element of `part` (1 true, 0 false), or -1.
int KnownInPart(const Kernel& kernel, const ConcatParts& parts, int part, int value, int64_t elements);

// Whether `index` is `rest + var` with `rest` free of `var` and a multiple of `align`: a
// vector of `align` consecutive values of `var`, starting at a multiple of `align`, is then
// one contiguous, aligned access.
bool ContiguousAlignedIn(const Index& index, int var, int64_t align);

}  // namespace tilefuse
