// The channels-last (NHWC) forms of the window rewrite (passes/window_ops), for the GPU:
// every 2-D convolution with group 1, depthwise convolution and pool of few enough taps
// reads its input as NHWC and writes its result as NHWC, each through an explicit
// transpose of the NCHW value (in: [0, 2, 3, 1], out: [0, 3, 1, 2]). The logical shapes
// stay NCHW; passes/sink_transposes then cancels the transposes between consecutive ops, so
// the kernels in between read and write NHWC.
//
//   conv, group 1     A [N·OH·OW, KH·KW·C] (c fastest) × Wt [KH·KW·C, Co] → [N, OH, OW, Co]
//                     1×1 unit-stride unpadded: A = reshape(transpose(x)); else
//                     A = reshape(transpose(window(x), [0, 2, 3, 4, 5, 1]))
//   depthwise, pools  the NCHW form's taps, each moved channels-last, combined there
//
// The conv form is kept exactly as written above: the implicit-GEMM path matches it.
#pragma once

#include "tilefuse/builder.h"

namespace tilefuse {

// Whether `node` (a Conv, MaxPool or AveragePool) has a channels-last form.
bool HasChannelsLastForm(const Node& node, const Shape& x_shape);

// The convolution without its bias, [N, Co, OH, OW] (a transpose of the NHWC result).
// inputs: x [N, C, H, W], w [Co, C/g, KH, KW].
Value ConvChannelsLast(GraphBuilder& b, Value x, Value w, const Attrs& a, const Shape& out);

// The pool, [N, C, OH, OW] (a transpose of the NHWC result).
Value PoolChannelsLast(GraphBuilder& b, Value x, const Node& pool);

}  // namespace tilefuse
