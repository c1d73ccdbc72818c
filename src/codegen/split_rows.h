// A pointwise kernel's flat loop split into rows: i0 → i0·L + i1 over [0, outer/L) × [0, L),
// L the smallest c of any i0 / c or i0 % c its indices compute (the innermost extent a view
// unravels the flat index by). The index simplifier then folds the
// divisions and remainders that views (transposes, im2col windows, broadcasts) put on the
// flat index — (i0·L + i1) % L → i1 — so they are computed once per row instead of once
// per element, and the row's loads become affine in i1 (a 3x3 convolution's im2col
// prologue on a 56x56 map: 8 integer divisions per element before). The C++ emitter prints
// the split kernel as its row kernels: a parallel loop over rows, a simd loop along each.
#pragma once

#include "codegen/kernel.h"

namespace tilefuse {

// The kernel unchanged unless it is pointwise (no reductions, inner 1), some index
// divides or takes a remainder of the flat index, and the rows so found are at least
// `min_row` long, more than one, and tile the loop.
Kernel SplitPointwiseRows(Kernel kernel, int64_t min_row = 8);

}  // namespace tilefuse
