// An f32 Conv node (1-3 spatial dims, groups, strides, dilations, pads) as one oneDNN
// convolution primitive, built once at compile time: the weights, when constant, reordered
// once into the layout oneDNN prefers (format_tag::any), with a per-channel scale and shift
// (folded batch norm, bias adds after the Conv) folded into them and the bias, and the
// activations and the residual add of the group's epilogue (backend/cpu/conv_epilogue.h) as
// post-ops. Activations are NCHW in memory between groups; each convolution reorders its
// input into oneDNN's blocked layout and its output back (plain NCHW makes oneDNN take its
// im2col + gemm path; the measurement: docs/design-notes.md), except between consecutive
// convolutions, where the backend keeps the blocked layout (KeepBlocked*).
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/conv_epilogue.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// Whether this build has oneDNN's convolution (CMake's TILEFUSE_CPU_GEMM=dnnl).
bool OnednnConvAvailable();

class OnednnConv {
 public:
  // `weights` and `bias`: the Conv's constant operands, or nullptr where they are read at run
  // time (plain layout; `post` then must not scale or shift). Errors: a convolution oneDNN
  // refuses, named by node.
  static StatusOr<std::unique_ptr<OnednnConv>> Create(const Graph& graph, const Node& conv, const Tensor* weights,
                                                      const Tensor* bias, const ConvEpilogue& post);
  ~OnednnConv();

  // Writes every element of `dst` (the conv's shape, NCHW). `weights` and `bias` are read
  // only where Create had none; `residual` (the output's shape) only with a residual post-op.
  void Run(const float* src, const float* weights, const float* bias, const float* residual, float* dst) const;

  // oneDNN's implementation, the layouts and the post-ops: "brg:avx512_core, nchw, post-ops: relu".
  const std::string& description() const;

  // Consecutive convolutions keep oneDNN's blocked layout between them (the reorders the
  // backend plans once for the network, backend/cpu/cpu_backend.cc): whether this
  // convolution's blocked output has the bytes of `consumer`'s blocked input (or, for
  // `as_residual`, of its blocked output, which its sum post-op adds to), and no more bytes
  // than the plain tensor, so that the value's buffer holds it.
  bool BlockedOutputFeeds(const OnednnConv& consumer, bool as_residual) const;
  // After these, Run reads `src` / `residual` and writes `dst` in the blocked layout: no
  // reorder on that side. Only where BlockedOutputFeeds said so, for every reader of the value.
  void KeepBlockedInput();
  void KeepBlockedOutput();
  void KeepBlockedResidual();

 private:
  friend class OnednnChannelMean;
  friend class OnednnChannelScale;
  struct Impl;
  explicit OnednnConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Squeeze-excitation's two reads of a convolution's output (MobileNetV3, EfficientNet): the
// mean over the spatial axes (GlobalAveragePool) and the product with a per-channel scale. On
// oneDNN (reduction, binary), so that the convolution's output can stay in its blocked layout
// (`producer`'s blocked dst) and the product be written in the next convolution's blocked
// input layout (`consumer`'s blocked src): no reorder on either side of the convolutions
// around the block. Created only by the backend's layout planning (cpu_backend.cc).
class OnednnChannelMean {
 public:
  // `mean`: an f32 ReduceMean over axes 2.. of a rank-4 tensor, keepdims, whose input is
  // `producer`'s blocked output. Writes [N, C, 1, 1] as plain (NCHW) bytes. Errors: the
  // blocked layout is not one whose [N, C, 1, 1] has the plain bytes, or oneDNN refuses.
  static StatusOr<std::unique_ptr<OnednnChannelMean>> Create(const Graph& graph, const Node& mean, const OnednnConv& producer);
  ~OnednnChannelMean();
  void Run(const float* src, float* dst) const;
  const std::string& description() const;

 private:
  struct Impl;
  explicit OnednnChannelMean(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class OnednnChannelScale {
 public:
  // `mul`: an f32 product x · s of rank 4, s [N, C, 1, 1] (plain) broadcast over the spatial
  // axes; x `producer`'s blocked output; the product written in `consumer`'s blocked input
  // layout, or plain (NCHW) where `consumer` is nullptr.
  static StatusOr<std::unique_ptr<OnednnChannelScale>> Create(const Graph& graph, const Node& mul, const OnednnConv& producer,
                                                              const OnednnConv* consumer);
  ~OnednnChannelScale();
  void Run(const float* x, const float* scale, float* dst) const;
  const std::string& description() const;
  // Whether `consumer`'s blocked input has no more bytes than the plain tensor (the value's buffer).
  static bool BlockedInputFits(const OnednnConv& consumer);

 private:
  struct Impl;
  explicit OnednnChannelScale(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilefuse
