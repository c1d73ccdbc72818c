// The Kernel IR as stable text, for a driver's dump between stages and for tests that
// match it line by line (testing/file_check.h). One item per line:
//
//   kernel tf_group0_row_reduction row_reduction: outer 4 x inner 8
//   b0 = %0 f32[32] in
//   b1 = %3 f32[32] out
//   %v0 = load b0[(i0 * 8 + i1)] : f32 [inner]
//   %v1 = accumulator r0 : f32
//   %v2 = sub %v0, %v1 : f32 [inner]
//   r0 = reduce_max %v0 over 8 : f32
//   store b1[(i0 * 8 + i1)] = %v2
//
// Loop variable 0 prints as i0 (outer, parallel), 1 as i1 (inner); [inner] marks the
// values computed per inner element, the others are computed once per outer iteration.
// Indices print as PrintIndex does: a gathered index value inside one is v<id>.
#pragma once

#include <string>

#include "codegen/kernel.h"

namespace tilefuse {

std::string PrintKernel(const Kernel& kernel);

}  // namespace tilefuse
