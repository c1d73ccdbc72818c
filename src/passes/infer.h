// Shape and dtype inference over a whole graph.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Re-runs InferNodeType over every node in id order and returns the graph with each
// node's dtype and shape replaced by the inferred ones. Graphs assembled by hand
// (Graph::AddNode) may declare wrong or missing types; this fixes them, and rejects a
// node whose inputs and attributes admit no type, naming the node.
StatusOr<Graph> InferTypes(const Graph& graph);

}  // namespace tilefuse
