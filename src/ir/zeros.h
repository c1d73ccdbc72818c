// Whether a value is zero everywhere: a constant of zeros, seen through the broadcasts,
// reshapes and casts in front of it (the builder broadcasts a scalar 0 for a padding; an
// 8-bit float's zero point arrives cast). Passes and lowerings that drop or move such zeros
// ask it (passes/fp8_products, passes/column_padding_into_products, the GEMM template's zero
// rows of B).
#pragma once

#include <vector>

#include "tilefuse/graph.h"

namespace tilefuse {

// `chain`, where given, gets the ids walked, `id` first and the constant last.
inline bool IsZeros(const Graph& g, int id, std::vector<int>* chain = nullptr) {
  for (;;) {
    const Node& n = g.node(id);
    if (chain) chain->push_back(id);
    if (n.op == OpCode::kBroadcast || n.op == OpCode::kReshape || n.op == OpCode::kCast) {
      id = n.inputs[0];
      continue;
    }
    if (n.op != OpCode::kConstant || !n.attrs.value) return false;
    for (int64_t i = 0; i < n.attrs.value->num_elements(); ++i)
      if (n.attrs.value->GetDouble(i) != 0.0) return false;
    return true;
  }
}

}  // namespace tilefuse
