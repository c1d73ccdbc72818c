// Gives each reader of a reshaped graph input its own copy of the reshape.
//
// A reshape several groups read belongs to one fusion group, which then stores it for the
// others: a training backward's logits gradient [8, 512, 50257], reshaped for both of the LM
// head's gradient products, was written out whole (412 MB) by the first product's group for
// the second to read. A reshape of an input moves no element, so each reader takes its own
// copy into its group and reads the input where it lies. Runs after the last CSE, which would
// merge the copies again; the original stays for a graph output that is the reshape (else DCE).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> UnshareInputReshapes(const Graph& graph);

}  // namespace tilefuse
