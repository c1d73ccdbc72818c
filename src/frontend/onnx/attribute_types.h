// Attribute types checked against the ONNX operator schemas before a handler runs. A
// handler's accessors (NodeContext::Int, Ints, ...) record a wrong-typed attribute as an
// error but return a default and let the handler go on, so every handler had to stop on
// its own before using the default — the importer fuzzer kept finding the ones that did
// not. Checking each attribute against its op's schema at the model's opset first turns
// the whole class into one clear error.
#pragma once

#include <cstdint>

#include "tilefuse/status.h"

namespace onnx {
class NodeProto;
}

namespace tilefuse::onnx_import {

// InvalidArgument naming the first attribute whose type differs from the one the ONNX
// schema of `node`'s op at `opset` declares (an attribute with type UNDEFINED, as old
// exporters write, counts as the type whose field it fills). Ok for ops or attributes the
// schemas do not know: their handlers check what they read.
Status CheckAttributeTypes(const onnx::NodeProto& node, int64_t opset);

}  // namespace tilefuse::onnx_import
