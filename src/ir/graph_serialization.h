// A graph as bytes and back, for the compiled-model cache (api/model_cache.h): the nodes, their
// attributes and the constants' bytes, exactly. Deserialize checks what a damaged or foreign
// blob could get wrong (an unknown op or dtype, an input that does not precede its user, a
// constant of the wrong size) and returns an error instead of building a broken graph; the
// graph it returns still goes through VerifyGraph.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

std::string SerializeGraph(const Graph& graph);
StatusOr<Graph> DeserializeGraph(std::string_view bytes);

// The bytes of every constant of `graph`, added up.
int64_t ConstantBytes(const Graph& graph);

}  // namespace tilefuse
