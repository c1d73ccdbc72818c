// Gives each reader of a shared reshape its own copy of it, where the reshape's input lies in
// memory as it is: a graph input or constant, or the result of an op that computes it (not a
// view of something else).
//
// A reshape several groups read belongs to one fusion group, which then stores it for the
// others. A training backward's logits gradient [8, 512, 50257], reshaped for both of the LM
// head's gradient products, was written out whole (412 MB) by the first product's group for
// the second to read; a LLaMA-style layer's RMS norm, reshaped to [tokens, hidden] for its
// q, k and v products (and again for gate and up), was copied by the first product's
// prologue for the others (9.3 µs, twice a layer at 8x512, H200, 2026-12-01). A reshape of a
// value in memory moves no element, so each reader takes its own copy into its group and
// reads the value where it lies. A reshape of a view stays shared: its readers would each
// compute the view (GPT-2's transposed, concatenated QKV gradient gained two prologue copies
// that way). Broadcasts of values in memory (through reshapes, in any order) likewise: each
// reader computes one as index arithmetic of its loads, where the group that took the shared
// one stored it for the others (a cos table broadcast over heads for the rotary embeddings
// of q and k in their products' epilogues: [tokens, heads · d] written twice and read back).
// Opaque readers (a library's or a template's step, reading stored operands) keep the shared
// view. Runs after the last CSE, which would merge the copies again; the original stays for a graph
// output that is the view (else DCE).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> UnshareReshapes(const Graph& graph);

}  // namespace tilefuse
