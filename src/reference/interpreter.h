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

// A legitimate alternative rounding of the reference, for measuring how much a graph's
// outputs depend on it (the differential fuzzer's conditioning probes). A correct
// kernel's op need only be faithfully rounded: where a node's exact (f64) value is not
// representable in its dtype, either neighbour, or with libm's 1-2 ulp error a value a
// few ulps off, is as right as the nearest one. With `ulps` > 0 every such element of
// every computed node below f64 moves by a pseudo-random whole number of its dtype's ulps
// in [-ulps, ulps] (drawn from `seed`, the node and the element); exactly representable
// results (max, where, relu, small integers) and views stay put, as every correct
// implementation computes them exactly.
// With `accumulate_in_dtype`, sums, means and matmuls below f64 accumulate term by term
// in their dtype, in order (what a plain f32 loop computes), instead of in f64.
struct ReferenceRounding {
  int ulps = 0;  // 0: round to nearest (RunReference)
  uint64_t seed = 0;
  bool accumulate_in_dtype = false;
};
StatusOr<std::vector<Tensor>> RunReference(const Graph& graph, const std::vector<Tensor>& inputs,
                                           const ReferenceRounding& rounding);

// Evaluates a single node given its input values (used by constant folding). `node`
// must not be a Parameter.
StatusOr<Tensor> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace tilefuse
