#include "passes/infer.h"

#include "passes/rewriter.h"

namespace tilefuse {

// The builder infers every node it creates, so copying the graph through it is
// exactly "infer everything"; the declared types of the old nodes are never read.
StatusOr<Graph> InferTypes(const Graph& graph) { return CopyGraph(graph); }

}  // namespace tilefuse
