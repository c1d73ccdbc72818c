// The table from ONNX op_type (default domain) to the handler that imports it. Each op
// family file (elementwise.cc, shape_ops.cc, ...) registers its handlers through one
// Register*Ops function; the table is built once, on first use.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/onnx/node_context.h"
#include "tilefuse/status.h"

namespace tilefuse::onnx_import {

// Imports one node: reads inputs and attributes from `ctx`, builds graph nodes with
// ctx.b(), and sets the outputs it supports. An output the handler leaves unset is an
// error only if a later node or the graph uses it.
using OpHandler = Status (*)(NodeContext& ctx);

struct OpSpec {
  OpHandler handler = nullptr;
  int min_inputs = 0;   // required inputs (present, non-empty)
  int max_inputs = 0;   // -1: any number
};

class OpRegistry {
 public:
  static const OpRegistry& Get();
  const OpSpec* Find(std::string_view op_type) const;
  std::vector<std::string> OpTypes() const;  // sorted
  void Add(std::string op_type, OpHandler handler, int min_inputs, int max_inputs);

 private:
  std::map<std::string, OpSpec, std::less<>> specs_;
};

void RegisterElementwiseOps(OpRegistry& registry);    // elementwise.cc
void RegisterActivationOps(OpRegistry& registry);     // activations.cc
void RegisterShapeOps(OpRegistry& registry);          // shape_ops.cc
void RegisterPaddingOps(OpRegistry& registry);        // padding.cc
void RegisterIndexingOps(OpRegistry& registry);       // indexing.cc
void RegisterGeneratorOps(OpRegistry& registry);      // generators.cc
void RegisterReductionOps(OpRegistry& registry);      // reductions.cc
void RegisterMatMulOps(OpRegistry& registry);         // matmul.cc
void RegisterNormalizationOps(OpRegistry& registry);  // normalization.cc
void RegisterNnOps(OpRegistry& registry);             // nn.cc
void RegisterConvTransposeOps(OpRegistry& registry);  // conv_transpose.cc
void RegisterLossOps(OpRegistry& registry);           // losses.cc
void RegisterMathFunctionOps(OpRegistry& registry);   // math_functions.cc
void RegisterResizeOps(OpRegistry& registry);         // resize.cc
void RegisterScatterOps(OpRegistry& registry);        // scatter.cc
void RegisterGatherNDOps(OpRegistry& registry);       // gather_nd.cc
void RegisterEinsumOps(OpRegistry& registry);         // einsum.cc
void RegisterTopKOps(OpRegistry& registry);           // top_k.cc
void RegisterNonZeroOps(OpRegistry& registry);        // non_zero.cc
void RegisterQuantizeOps(OpRegistry& registry);       // quantize.cc

}  // namespace tilefuse::onnx_import
