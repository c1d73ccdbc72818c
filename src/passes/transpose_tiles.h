// A (batched) matrix transpose of a constant's bytes, for the passes that lay weights out at
// compile time (passes/fold_constants, passes/k_major_weights): out[b][j][i] = in[b][i][j].
#pragma once

#include <cstdint>

#include "tilefuse/tensor.h"

namespace tilefuse {

// `in` [..., rows, cols] as [..., cols, rows] into `out` (of that shape), moved as elements of
// 1, 2, 4 or 8 bytes; false for another element size.
bool TransposeLastTwoDims(const Tensor& in, Tensor& out, int64_t batches, int64_t rows, int64_t cols);

}  // namespace tilefuse
