// Readable text dump of a graph, one node per line:
//   %3 = add(%1, %2) : f32[2,8]    # 'Add_0'
#pragma once

#include <string>

#include "tilefuse/graph.h"

namespace tilefuse {

std::string PrintGraph(const Graph& graph);
std::string PrintNode(const Node& node);

}  // namespace tilefuse
