// The reference interpreter: runs any graph op by op in f64, deterministically. Every
// node's values are rounded to its declared dtype when stored (so half-type graphs
// round like the real thing). It is the oracle for every test of fused kernels.
#pragma once

#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// `inputs` follow graph.inputs() order and must match each parameter's dtype and
// shape (otherwise an InvalidArgument naming the input). Returns one tensor per
// graph output, in graph.outputs() order, each in the output node's dtype.
StatusOr<std::vector<Tensor>> RunReference(const Graph& graph, const std::vector<Tensor>& inputs);

// Evaluates a single node given its input values (used by constant folding). `node`
// must not be a Parameter.
StatusOr<Tensor> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace tilefuse
