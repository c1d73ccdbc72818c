// The depthwise-convolution skeleton: a channels-last depthwise convolution (NHWC source,
// per-channel weights per tap) with the group's epilogue fused.
//
//   thread t  →  channels c0 .. c0+kV, output pixels (n, oh, ow0 .. ow0+kP)
//   for each row of taps (dh):   the row's inputs, read once into registers (x[Seg][kV]:
//                                 the kP pixels' windows overlap), zeros outside the image
//     for each tap (dw) of it:   acc[p][v] += x[p·stride + dw - dw_min][v] · weight[c0 + v]
//   epilogue(base, acc[p])       per output pixel: the group's program over kV channels
//
// Each thread slides a row of taps over kP neighbouring output pixels, so an input pixel is
// loaded once per row of taps instead of once per tap and output pixel (49 loads an element
// for a 7x7 in the pointwise loop form). The generated part (codegen/cuda/cuda_depthwise_emitter.cc)
// is the Config, one Row per row of taps with one Tap per tap, and the Epilogue.
#pragma once

#include "tile_mma.cuh"

namespace tf {

// Config: Element (the source's), Index, kV (channels a thread), kP (pixels a thread), kH, kW,
// kC (the source's height, width, channels), kOH, kOW (the output's), kStrideH, kStrideW,
// kThreads (threads with work).
template <class Config>
struct DepthwiseThread {
  using Index = typename Config::Index;
  using Storage = typename Config::Element::Storage;
  static constexpr int kV = Config::kV, kP = Config::kP;
  static constexpr int kGroups = Config::kC / kV, kStrips = (Config::kOW + kP - 1) / kP;

  int c0, ow0, oh;
  Index n;
  float acc[kP][kV];

  static __device__ __forceinline__ Index Thread() { return (Index)blockIdx.x * blockDim.x + threadIdx.x; }
  // Whether this thread has work (the grid's last block may reach past it): asked first, so
  // that threads without work leave before any index arithmetic.
  static __device__ __forceinline__ bool Active() { return Thread() < Config::kThreads; }

  __device__ __forceinline__ DepthwiseThread() {
    const Index t = Thread();
    c0 = (int)(t % kGroups) * kV;
    Index rest = t / kGroups;
    ow0 = (int)(rest % kStrips) * kP;
    rest /= kStrips;
    oh = (int)(rest % Config::kOH);
    n = rest / Config::kOH;
#pragma unroll
    for (int p = 0; p < kP; ++p)
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[p][v] = 0.0f;
  }

  // The inputs of the row of taps at height offset Dh into x: Seg pixels from width offset
  // DwMin, zeros outside the image. False when the row is above or below the image (its taps
  // add nothing).
  template <int Dh, int DwMin, int Seg>
  __device__ __forceinline__ bool Row(const Storage* source, float (&x)[Seg][kV]) const {
    const int ih = oh * Config::kStrideH + Dh;
    if (ih < 0 || ih >= Config::kH) return false;
    const Storage* row = source + ((n * Config::kH + ih) * (Index)Config::kW) * Config::kC + c0;
#pragma unroll
    for (int j = 0; j < Seg; ++j) {
      const int iw = ow0 * Config::kStrideW + DwMin + j;
      if (iw >= 0 && iw < Config::kW) {
        Storage raw[kV];
        tf_vload<kV>(row + (Index)iw * Config::kC, raw);
#pragma unroll
        for (int v = 0; v < kV; ++v) x[j][v] = Config::Element::ToFloat(raw[v]);
      } else {
#pragma unroll
        for (int v = 0; v < kV; ++v) x[j][v] = 0.0f;
      }
    }
    return true;
  }

  // One tap, Offset pixels right of its row's first input: its kV weights times each pixel's.
  template <int Offset, class WeightElement, int Seg>
  __device__ __forceinline__ void Tap(const float (&x)[Seg][kV], const typename WeightElement::Storage* weights) {
    typename WeightElement::Storage w[kV];
    tf_vload<kV>(weights + c0, w);
#pragma unroll
    for (int p = 0; p < kP; ++p)
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[p][v] += x[p * Config::kStrideW + Offset][v] * WeightElement::ToFloat(w[v]);
  }

  // The epilogue of each output pixel inside the image: epilogue(base, acc[p]) with `base` the
  // flat NHWC offset of channel c0.
  template <class Epilogue>
  __device__ __forceinline__ void Finish(const Epilogue& epilogue) const {
#pragma unroll
    for (int p = 0; p < kP; ++p) {
      if (ow0 + p < Config::kOW) {
        const Index base = ((n * Config::kOH + oh) * (Index)Config::kOW + ow0 + p) * Config::kC + c0;
        epilogue(base, acc[p]);
      }
    }
  }
};

}  // namespace tf
