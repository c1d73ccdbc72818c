// Gives each window its own copy of the transpose it reads, after CSE has merged them.
//
// After passes/sink_transposes a value stored NHWC reaches each convolution's window as
// transpose(v, [0, 3, 1, 2]). Two convolutions reading one value (a residual block's first
// convolution and its strided projection) share that transpose, and a shared view belongs
// to one fusion group: the planner puts it in the producer's group, which then stores the
// value NCHW for both. One copy per window joins each gemm group's prologue instead (the
// im2col index arithmetic), and the producer stores v as it is.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> UnshareWindowViews(const Graph& graph);

}  // namespace tilefuse
