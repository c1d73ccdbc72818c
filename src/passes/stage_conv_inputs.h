// Gives a channels-last convolution that reads an NCHW value (a graph input, or what an
// op kept in NCHW computes) an NHWC copy of it to read instead.
//
// The CUDA GEMM template reads a convolution's im2col straight from an NHWC activation by
// TMA (an implicit GEMM, codegen/gemm_template.h GemmConvWindow). Over an NCHW value the
// window's columns (channels fastest) would be gathered H·W elements apart and im2col
// copied, KH·KW times the activation. Here the window reads
// transpose(transpose(x, [0, 2, 3, 1]), [0, 3, 1, 2]) instead: the inner transpose is the
// copy (the planner keeps it a group of its own: fusion/planner.cc,
// StagedConvInput), the outer one the view
// the implicit GEMM matches. Only where the template can take it: half precision, 2-D,
// channels a multiple of 64. Runs last (composing transposes would undo it).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> StageConvInputs(const Graph& graph);

}  // namespace tilefuse
