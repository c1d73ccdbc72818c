// Which ONNX ops got a new version after opset 21, and whether that version kept the
// op's meaning. The handlers were written against the opset 13–21 definitions; a model
// of opset 22 or 23 is accepted as long as each op it uses either has no newer version
// or one that only admits more element types (bfloat16 in 22, float4e2m1 in 23).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tilefuse/status.h"

namespace tilefuse::onnx_import {

struct OpsetChange {
  int64_t opset;          // the opset that introduced the new version
  std::string_view op;    // ONNX op_type
  bool types_only;        // true: only new element types, same semantics
};

// The changes of opsets 22 and 23 (from the ONNX operator changelog).
std::span<const OpsetChange> OpsetChangesAfter21();

// Ok when `op` at `opset` means what it meant at opset 21 according to `changes`;
// otherwise Unimplemented naming the op and the opset where its meaning changed.
Status CheckOpMeaningAtOpset(std::string_view op, int64_t opset,
                             std::span<const OpsetChange> changes = OpsetChangesAfter21());

}  // namespace tilefuse::onnx_import
