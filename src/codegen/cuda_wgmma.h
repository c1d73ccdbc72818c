// The Hopper wgmma instruction for one shape, printed as a device function: its operand
// list names N/2 accumulator registers, so each shape a template uses is printed on demand
// instead of living in the tile library as dozens of hand-written specialisations.
#pragma once

#include <string>

#include "tilefuse/dtype.h"

namespace tilefuse {

// `__device__ void name(float (&d)[n/2], desc_a, desc_b, int accumulate)`: D (+)= A·B for a
// 64×n×16 step, A and B from shared-memory descriptors, f32 accumulators. `dtype` is the
// operands' type (bf16 or f16); `b_mn_major` selects B stored N-contiguous (transposed).
// With `accumulate` 0 the product overwrites D.
std::string WgmmaFunction(const std::string& name, int n, DType dtype, bool b_mn_major);

// The same with A from registers: `name(float (&d)[n/2], const unsigned (&a)[4], desc_b,
// int accumulate)`, `a` holding this thread's part of the 64×16 A tile as pairs of half
// values in the m64k16 fragment layout (which an f32 accumulator fragment converts to
// in place: attention's probabilities feed P·V without going through shared memory).
std::string WgmmaRegisterAFunction(const std::string& name, int n, DType dtype, bool b_mn_major);

}  // namespace tilefuse
