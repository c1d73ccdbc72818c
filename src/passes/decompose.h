// Decomposition of composite ops into primitives.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Rewrites every composite op (OpKind::Composite) into the primitives a user would
// write by hand, so that the fusion planner sees one pattern however the model spelled
// it:
//   softmax     = e / reduce_sum(e)        with e = exp(x - reduce_max(x)), keepdims
//   log_softmax = (x - max) - log(reduce_sum(exp(x - max)))
//   layer_norm  = (x - mean) * rsqrt(mean((x - mean)^2) + eps) * scale (+ bias),
//                 mean over the axes from attrs.axis to the last
//   gelu        = 0.5 * x * (1 + erf(x * (1/sqrt 2)))
//   gelu (tanh) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// Half-precision (f16, bf16) inputs are cast to f32 first and the result back, as
// PyTorch does. The new nodes keep the composite's name.
StatusOr<Graph> DecomposeComposites(const Graph& graph);

}  // namespace tilefuse
