// Common subexpression elimination.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Hash-conses nodes: two nodes with the same op, the same (already merged) inputs and
// the same attributes become one, which keeps the first one's name. Small constants are
// compared by value, large ones by identity of their shared buffer (comparing weights
// byte by byte costs more than it finds). random_uniform nodes merge only when seed,
// dtype and shape agree, i.e. when they would draw the same numbers anyway.
// Parameters are never merged. Users of merged nodes are redirected; the dropped
// duplicates leave no dead code behind.
StatusOr<Graph> EliminateCommonSubexpressions(const Graph& graph);

}  // namespace tilefuse
