// The CUDA depthwise-convolution template ("depthwise direct"): for a DepthwiseTemplateKernel
// (codegen/depthwise_template.h), each thread computes `vector` channels (one 16-byte load
// of the NHWC source) of `pixels` neighbouring output pixels along a row, in f32 registers:
//
//   for each row of taps:  load the input pixels the row's taps reach for those output
//                          pixels once (zero outside the image), then for each tap of the
//                          row (in the sum's order) load its weights and add
//                          weight · input[p·stride + offset] to every pixel's accumulator
//   epilogue:              the group's scalar program per element, the accumulator given
//                          for the sum, stored as vectors where it writes at its own offset
//
// A 7x7 tap row over 4 pixels reads 10 input vectors instead of 28, and its weights once
// for 4 pixels; the pointwise loop read every tap of every element at its own index.
#pragma once

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/depthwise_template.h"

namespace tilefuse {

struct CudaDepthwiseConfig {
  int vector = 0;  // channels per thread; 0: 16 bytes of the source, halved until it divides C
  int pixels = 0;  // output pixels per thread along a row; 0: from the taps' width
  int threads = 256;
};

CudaDepthwiseConfig ResolveDepthwiseConfig(const DepthwiseTemplateKernel& kernel, CudaDepthwiseConfig requested);

// InvalidArgument for a configuration the template cannot run.
StatusOr<CudaKernelSource> EmitCudaDepthwise(const DepthwiseTemplateKernel& kernel, const CudaDepthwiseConfig& config);

}  // namespace tilefuse
