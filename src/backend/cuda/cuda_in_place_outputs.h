// Whether a run on the caller's memory may write a graph output straight into a graph
// input's memory: an input the caller updates in place with the output's value (a KV cache
// written at a decode step's position, a counter incremented), so that the update costs no
// copy after the run.
//
// The GPU runs a program's steps in order on one stream (each kernel waits for the one
// before it), so the bytes of input x may take output v's value while v is computed when no
// element of x is read after it is overwritten:
//   - every step that reads x other than v's own runs before v's step;
//   - within v's step, only v's group reads x (nothing launched with it), a pointwise group
//     that reads each element of x only for the element of v at the same index: every op
//     of the group that depends on x is elementwise (one-to-one) at x's shape.
// Anything else (x read through a view, a broadcast or a reduction in v's group, a reader
// after v's step or in the same launch, x itself a graph output, copied out of x's memory
// after the run) leaves v in its own memory, copied there after the run.
#pragma once

#include "backend/cuda/cuda_program.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// `input` and `output` are positions in g.inputs() and g.outputs().
bool OutputMayOverwriteInput(const Graph& g, const FusionPlan& plan, const CudaProgram& program, int output, int input);

}  // namespace tilefuse
