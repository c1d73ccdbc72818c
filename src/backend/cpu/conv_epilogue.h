// Which oneDNN post-ops a CPU conv group's epilogue is (backend/cpu/onednn_conv.h): found by
// what the epilogue computes, not by the op names that spell it.
//
//   conv → [· or ± a per-channel constant]* → f1 → [+ residual] → f2 → the group's output
//
// The per-channel affine ops (bias adds, batch norm as exported: scale and shift constants)
// are folded into the weights and bias once at compile time. f1 and f2 are the scalar
// programs between those points; each is evaluated at probe values and must equal one of
// oneDNN's eltwise forms everywhere (ReLU, leaky ReLU, clip, a linear map, a linear map then
// a clip — HardSigmoid —, HardSwish, sigmoid, tanh, SiLU, GELU erf or tanh). The residual is a
// tensor of the output's shape computed elsewhere, added once. Anything else (two outputs, a
// value read per spatial position, an activation oneDNN lacks) is refused with the reason:
// the group then runs as the convolution and a generated epilogue kernel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct ConvEltwise {
  enum class Kind { kRelu, kClip, kLinear, kHardswish, kLogistic, kTanh, kSwish, kGeluErf, kGeluTanh };
  Kind kind = Kind::kRelu;
  double alpha = 0, beta = 0;  // relu: negative slope; clip: lo, hi; linear: a·x + b
};

struct ConvEpilogue {
  std::vector<double> scale, shift;  // per output channel: scale·conv + shift (empty: none)
  std::vector<ConvEltwise> before_residual;
  int residual = -1;  // the graph value added after before_residual, or -1
  std::vector<ConvEltwise> after_residual;
  int output = -1;  // the graph value the convolution then writes
};

// "scale/shift, relu, sum, hardswish": what runs inside the primitive, in order.
std::string DescribeConvEpilogue(const ConvEpilogue& epilogue);

// The value of a constant or an inlined generator (computed once from constants).
using ConstantValue = std::function<StatusOr<Tensor>(int node)>;

// The post-ops `epilogue` (SplitGemmGroup's: the members after `conv`, the group's outputs
// among them) equals, or why none do (Unimplemented). `is_constant[n]`: n is a constant or
// an inlined generator, whose value `value_of` gives.
StatusOr<ConvEpilogue> MatchConvEpilogue(const Graph& graph, int conv, const FusionGroup& epilogue,
                                         const std::vector<bool>& is_constant, const ConstantValue& value_of);

}  // namespace tilefuse
