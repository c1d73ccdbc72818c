// Import-time constants. PyTorch exports compute shapes at run time (Shape → Gather →
// Unsqueeze → Concat → Reshape); tilefuse has static shapes, so the importer evaluates
// such chains while it imports them. The tracker remembers the value of every graph
// node whose value is known: constants, and small nodes whose inputs are all known
// (evaluated with the reference interpreter's EvaluateNode).
#pragma once

#include <memory>
#include <unordered_map>

#include "tilefuse/builder.h"
#include "tilefuse/tensor.h"

namespace tilefuse::onnx_import {

class ConstantTracker {
 public:
  // The value of `v` when known, else nullptr.
  const Tensor* Find(const GraphBuilder& builder, Value v) const;
  // Evaluates the nodes added since `first_new_node` whose inputs are all known.
  void FoldNewNodes(const GraphBuilder& builder, int first_new_node);

 private:
  std::unordered_map<int, std::shared_ptr<const Tensor>> folded_;
};

}  // namespace tilefuse::onnx_import
