// An f32 MaxPool or AveragePool node (1-3 spatial dims, strides, dilations, asymmetric pads,
// ceil_mode as the importer's extra end padding, AveragePool with or without the padding
// counted) as one oneDNN pooling primitive, built once at compile time, on NCHW in and out
// (oneDNN 2.6 runs its jit pooling on plain layouts: ResNet's 3x3 stride-2 max pool over
// 64x112x112 takes ~0.1 ms on 2 EPYC cores, against 2.1 ms for the window rewrite's
// generated kernel, whose clamped strided loads GCC leaves scalar and branchy).
// The passes keep such nodes for the CPU backend (WindowOpsOptions::keep_f32_pool).
#pragma once

#include <memory>
#include <string>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

class OnednnPool {
 public:
  // Errors: a pool oneDNN refuses, or a build without oneDNN, named by node.
  static StatusOr<std::unique_ptr<OnednnPool>> Create(const Graph& graph, const Node& pool);
  ~OnednnPool();

  // Reads `src` (the input's shape, NCHW) and writes every element of `dst` (the pool's).
  void Run(const float* src, float* dst) const;

  // oneDNN's implementation and algorithm: "oneDNN jit:avx512_core, max".
  const std::string& description() const;

 private:
  struct Impl;
  explicit OnednnPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilefuse
