// Dtype and shape inference for one node from its inputs and attributes. The builder
// calls it for every node it creates; passes/infer re-runs it over a whole graph.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Sets node.dtype and node.shape (inputs must be in `graph`), or says why the node is
// invalid (without location context; the caller adds it).
Status InferNodeType(const Graph& graph, Node& node);

// Output spatial size of a convolution or pooling window along one dim.
int64_t PooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                   int64_t pad_end, int64_t dilation);

}  // namespace tilefuse
