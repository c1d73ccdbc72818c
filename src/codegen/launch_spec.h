// LaunchSpec: how one generated kernel is launched, as the emitter decided it — a 3-D grid
// and block, a thread-block cluster, dynamic shared memory, and the parameters in order:
// a graph value's device address, a TMA descriptor over a graph value (encoded by the
// backend once it knows the address), a 64-bit scalar, an address inside the kernel's
// scratch memory, or a struct's bytes. The loop templates fill it with a 1-D grid of buffers; the compute-bound
// templates need the rest.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "tilefuse/dtype.h"

namespace tilefuse {

// TMA's im2col mode (cuTensorMapEncodeIm2col) over an NHWC activation, dims (C, W, H, N):
// each copy moves `pixels` consecutive output pixels' `channels` channels at one filter tap.
// The corners bound where a window's first tap may start (−pad, pad − (k − 1)·dilation per
// spatial dim, W then H); `strides` are the convolution's (W, H) strides.
struct Im2colMapArg {
  std::array<int, 2> lower{0, 0};
  std::array<int, 2> upper{0, 0};
  std::array<int, 2> strides{1, 1};
  int channels = 64;
  int pixels = 128;
};

// A TMA descriptor (cuTensorMapEncodeTiled) over a graph value: dims innermost first, in
// elements; strides of dims 1.. in bytes; the shared-memory box each copy moves (tiled
// mode) or, with `im2col`, the im2col mode's parameters instead of the box.
struct TensorMapArg {
  int node = -1;
  DType dtype = DType::kBF16;
  int rank = 3;
  std::array<int64_t, 5> dims{1, 1, 1, 1, 1};
  std::array<int64_t, 4> strides_bytes{0, 0, 0, 0};
  std::array<int, 5> box{1, 1, 1, 1, 1};
  bool swizzle_128b = true;
  // f32 read as TF32 (the map's TFLOAT32 type): the tensor cores' operand, each element
  // rounded to TF32 by the copy rather than cut to its top 19 bits by the MMA.
  bool tf32 = false;
  int64_t offset_bytes = 0;  // where the mapped tensor starts in the value (a slice): a multiple of 16
  std::optional<Im2colMapArg> im2col;
};

struct LaunchArg {
  enum class Kind { kBuffer, kTensorMap, kScalar, kScratch, kBytes };
  Kind kind = Kind::kBuffer;
  int node = -1;       // kBuffer: the graph value whose device address is passed
  TensorMapArg map;    // kTensorMap
  int64_t scalar = 0;  // kScalar; kScratch: the byte offset into the scratch memory
  // kBytes: a struct parameter's bytes, passed by value (the attention template's key-block
  // tables where the lengths come at launch: data of this binding, not text of the kernel).
  std::vector<uint8_t> bytes;
};

// The scratch memory's first bytes: every split kernel's tile counters (zero between
// launches); partial sums follow them. One region for all kernels' counters: with each
// kernel's partials right after its own counters, a 120-tile column reduction's counters
// lay where a 32-tile one had left partial sums (MobileNetV3-small f32 b32: 15 of 32 images
// NaN on an H100).
inline constexpr int64_t kScratchCounterBytes = 64 * 1024;  // 16384 tiles
// Its last 8 bytes: an amax computed in a GEMM template's epilogue (codegen/gemm_amax.h), the
// bits of the largest magnitude so far, then how many warps have added theirs.
inline constexpr int64_t kAmaxScratchOffset = kScratchCounterBytes - 8;

struct LaunchSpec {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int, 3> block{1, 1, 1};
  std::array<int, 3> cluster{1, 1, 1};
  // The kernel walks its work by gridDim (a persistent grid of clusters): the launcher may
  // launch fewer clusters, and does where fewer can be resident at once (a second wave of
  // persistent clusters would double the time).
  bool persistent_clusters = false;
  // The kernel calls tf_await_prior_grid() before it touches memory (every generated kernel
  // does, first thing): the launcher may then launch it programmatically (PDL), its CTAs
  // placed and started while the kernel before it in the stream finishes.
  bool awaits_prior_grid = false;
  int64_t dynamic_shared_bytes = 0;
  // Device memory the kernel keeps to itself between launches (split-K partial sums and
  // tile counters): zeroed once when allocated, and every kernel leaves what must be zero
  // at its next launch zero again (so captured graphs replay). Kernels of one stream may
  // share it: they never run at the same time.
  int64_t scratch_bytes = 0;
  std::vector<LaunchArg> args;
};

}  // namespace tilefuse
