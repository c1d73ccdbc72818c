// The verifier: checks the invariants every pass may rely on. Types and shapes agree
// with inference, every input is defined before use (single definition, acyclic),
// outputs exist, and input/output names are unique.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

Status VerifyGraph(const Graph& graph);

}  // namespace tilefuse
