// The depthwise-convolution template's view of a pointwise group: a channels-last depthwise
// convolution combined tap by tap, as passes/window_ops_nhwc.h lowers it and the transposes
// leave it once they sink,
//
//   sum = Σ_k  cast(reshape(window_k(source)))  ·  broadcast(weight_k)
//
// with window_k a kernel-1 window (tap k's offset as its padding, zero fill) over the NHWC
// source [N, H, W, C] and weight_k the tap's per-channel weights [C] (a constant once the
// weights fold). The pointwise loop reads each tap of each output element at its own index
// (49 loads per element for a 7x7); the template reads each input pixel once per row of
// taps into registers and slides the taps over P neighbouring output pixels
// (codegen/cuda/cuda_depthwise_emitter.h).
//
//   epilogue   the group's members after the sum (bias, activation, casts, more outputs) as
//              a pointwise Kernel over the sum's flat NHWC offset; its loads of the sum read
//              the accumulator instead
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct DepthwiseTap {
  int64_t dh = 0, dw = 0;  // reads source[n, oh·stride_h + dh, ow·stride_w + dw, c], zero outside
  int weight_buffer = -1;  // the tap's weights [C], a buffer of the epilogue Kernel
};

struct DepthwiseTemplateKernel {
  std::string name;
  int source_buffer = -1;  // [N, H, W, C], a buffer of the epilogue Kernel
  DType dtype = DType::kBF16;
  int64_t images = 0, height = 0, width = 0, channels = 0;
  int64_t out_height = 0, out_width = 0;
  int64_t stride_h = 1, stride_w = 1;
  std::vector<DepthwiseTap> taps;  // in the sum's order
  int sum = -1;                    // the sum's node (f32, [N, OH, OW, C])
  // Over the sum's flat offset (loop variable 0). Its buffers are the kernel's parameters,
  // the source and the weights included; `sum_loads` read the accumulator.
  Kernel epilogue;
  std::vector<int> sum_loads;
};

// The template form of pointwise `group`, or why it does not apply (no tap sum, a tap or a
// weight it cannot read directly, an epilogue reading the sum through a view); the caller
// keeps the loop template.
StatusOr<DepthwiseTemplateKernel> LowerDepthwiseTemplate(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined);

}  // namespace tilefuse
