// Dead code elimination.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Drops every node that no graph output depends on. Parameters always stay, even
// unused ones: they are the graph's signature, and callers pass inputs by position.
StatusOr<Graph> EliminateDeadCode(const Graph& graph);

}  // namespace tilefuse
