#include "codegen/cuda/cuda_depthwise_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/emit_util.h"

namespace tilefuse {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Consecutive taps on one row of the window share the input pixels they read.
struct TapRow {
  int64_t dh = 0, dw_min = 0, dw_max = 0;
  std::vector<const DepthwiseTap*> taps;
};

std::vector<TapRow> TapRows(const DepthwiseTemplateKernel& k) {
  std::vector<TapRow> rows;
  for (const DepthwiseTap& tap : k.taps) {
    if (rows.empty() || rows.back().dh != tap.dh) rows.push_back({tap.dh, tap.dw, tap.dw, {}});
    TapRow& row = rows.back();
    row.dw_min = std::min(row.dw_min, tap.dw);
    row.dw_max = std::max(row.dw_max, tap.dw);
    row.taps.push_back(&tap);
  }
  return rows;
}

// Whether a store writes the element at the loop's own offset plus a multiple of the vector.
bool StoresAtOwnOffset(const KernelStore& s, int vector) {
  AffineIndex a;
  return !UsesValue(s.index) && AsAffine(s.index, &a) && a.c0 == 1 && a.c1 == 0 && a.offset % vector == 0;
}

// The buffers the epilogue reads or writes; the sum's is read from the accumulators (and
// passed only when the group stores the sum).
std::vector<int> EpilogueBufferIds(const DepthwiseTemplateKernel& k) {
  std::vector<bool> used(k.epilogue.buffers.size(), false);
  for (const ScalarValue& v : k.epilogue.values)
    if (v.kind == ScalarValue::Kind::kLoad) used[v.buffer] = true;
  for (const KernelStore& s : k.epilogue.stores) used[s.buffer] = true;
  std::vector<int> ids;
  for (size_t b = 0; b < used.size(); ++b)
    if (used[b] && (k.epilogue.buffers[b].node != k.sum || k.epilogue.buffers[b].is_output)) ids.push_back(static_cast<int>(b));
  return ids;
}

std::string EpilogueBuffers(const DepthwiseTemplateKernel& k) {
  std::string out;
  for (int b : EpilogueBufferIds(k)) out += fmt::format("{}b{}", out.empty() ? "" : ", ", b);
  return out;
}

// The epilogue of one output pixel's kV channels from flat offset `base`, the accumulators in
// place of the sum: stores at the element's own offset gathered into vectors, others direct.
std::string EpilogueStruct(const DepthwiseTemplateKernel& k, int vector) {
  const Kernel& e = k.epilogue;
  std::string out = "  struct Epilogue {\n";
  for (int b : EpilogueBufferIds(k))
    out += fmt::format("    {}{}* __restrict__ b{};\n", e.buffers[b].is_output ? "" : "const ", StorageType(e.buffers[b].dtype), b);
  out += fmt::format("    __device__ __forceinline__ void operator()(tf_index_t base, const float (&acc)[{}]) const {{\n", vector);
  std::map<int, std::string> given;
  for (int v : k.sum_loads) given[v] = "acc[v]";
  std::vector<int> roots;
  for (const KernelStore& s : e.stores) roots.push_back(s.value);
  for (size_t i = 0; i < e.stores.size(); ++i)
    if (StoresAtOwnOffset(e.stores[i], vector))
      out += fmt::format("      {} o{}[{}];\n", StorageType(e.buffers[e.stores[i].buffer].dtype), i, vector);
  out += fmt::format("#pragma unroll\n      for (int v = 0; v < {}; ++v) {{\n        const tf_index_t i0 = base + v;\n", vector);
  const std::string indent = "        ";
  out += CudaElementProgram(e, roots, given, {"i0", "i1"}, indent);
  for (size_t i = 0; i < e.stores.size(); ++i) {
    const KernelStore& s = e.stores[i];
    const std::string_view dt = DTypeName(e.buffers[s.buffer].dtype);
    if (StoresAtOwnOffset(s, vector)) out += fmt::format("{}o{}[v] = tf_pack_{}(v{});\n", indent, i, dt, s.value);
    else out += fmt::format("{}b{}[{}] = tf_pack_{}(v{});\n", indent, s.buffer, PrintIndex(s.index, {"i0", "i1"}), dt, s.value);
  }
  out += "      }\n";
  for (size_t i = 0; i < e.stores.size(); ++i) {
    const KernelStore& s = e.stores[i];
    if (!StoresAtOwnOffset(s, vector)) continue;
    AffineIndex a;
    AsAffine(s.index, &a);
    out += fmt::format("      tf_vstore<{}>(b{} + base + {}, o{});\n", vector, s.buffer, a.offset, i);
  }
  return out + "    }\n  };\n";
}

}  // namespace

CudaDepthwiseConfig ResolveDepthwiseConfig(const DepthwiseTemplateKernel& k, CudaDepthwiseConfig c) {
  // 4 channels x 4 pixels a thread measured best on an H100 (2026-11-25, bf16 b32, ConvNeXt-tiny
  // 7x7 stage 1: 75 us against 135 for 8 x 2, 124 for 8 x 4 and 241 in the pointwise lane form;
  // MobileNetV3-small's 3x3 and 5x5 too): more threads, and the row's inputs and accumulators
  // stay within about 100 registers.
  if (c.vector == 0) {
    c.vector = 4;
    while (c.vector > 1 && k.channels % c.vector != 0) c.vector /= 2;
  }
  if (c.pixels == 0) c.pixels = 4;
  c.pixels = static_cast<int>(std::clamp<int64_t>(c.pixels, 1, std::max<int64_t>(1, k.out_width)));
  if (c.threads == 0) c.threads = 256;
  return c;
}

StatusOr<CudaKernelSource> EmitCudaDepthwise(const DepthwiseTemplateKernel& k, const CudaDepthwiseConfig& c) {
  if (c.vector < 1 || c.vector > 16 || (c.vector & (c.vector - 1)) != 0 || k.channels % c.vector != 0)
    return InvalidArgument(fmt::format("{}: {} channels per thread (need a power of two up to 16 dividing {})", k.name, c.vector, k.channels));
  if (c.pixels < 1 || c.pixels > 8) return InvalidArgument(fmt::format("{}: {} pixels per thread (need 1 to 8)", k.name, c.pixels));
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    return InvalidArgument(fmt::format("{}: {} threads per block (need a multiple of 32 in [32, 1024])", k.name, c.threads));
  const Kernel& e = k.epilogue;
  const int64_t groups = k.channels / c.vector, strips = CeilDiv(k.out_width, c.pixels);
  const int64_t threads = k.images * k.out_height * strips * groups;
  const std::vector<TapRow> rows = TapRows(k);
  int64_t widest = 1;  // of the rows' taps, for the strategy
  for (const TapRow& row : rows) widest = std::max(widest, row.dw_max - row.dw_min + 1);

  // The skeleton (codegen/cuda/device/depthwise.cuh) on this problem: its Config, a Row call
  // per row of taps with a Tap call per tap, and the epilogue per output pixel.
  std::string b = fmt::format(
      "  struct Config {{\n"
      "    using Element = {};\n    using Index = tf_index_t;\n"
      "    enum : int {{ kV = {}, kP = {}, kH = {}, kW = {}, kC = {}, kOH = {}, kOW = {}, kStrideH = {}, kStrideW = {} }};\n"
      "    enum : long long {{ kThreads = {} }};\n"
      "  }};\n",
      TileElementType(k.dtype), c.vector, c.pixels, k.height, k.width, k.channels, k.out_height, k.out_width, k.stride_h, k.stride_w,
      threads);
  b += EpilogueStruct(k, c.vector);
  b += "  if (!tf::DepthwiseThread<Config>::Active()) return;\n  tf::DepthwiseThread<Config> t;\n";
  for (const TapRow& row : rows) {
    const int64_t seg = (c.pixels - 1) * k.stride_w + (row.dw_max - row.dw_min) + 1;
    b += fmt::format("  {{\n    float x[{}][{}];\n    if (t.Row<{}, {}>(b{}, x)) {{\n", seg, c.vector, row.dh, row.dw_min, k.source_buffer);
    for (const DepthwiseTap* tap : row.taps)
      b += fmt::format("      t.Tap<{}, {}>(x, b{});\n", tap->dw - row.dw_min, TileElementType(e.buffers[tap->weight_buffer].dtype),
                       tap->weight_buffer);
    b += "    }\n  }\n";
  }
  b += fmt::format("  t.Finish(Epilogue{{{}}});\n", EpilogueBuffers(k));

  CudaKernelConfig launch;
  launch.threads = c.threads;
  launch.vector = c.vector;
  // The sum's buffer is read from the accumulators, unless the group stores the sum itself.
  std::vector<int> unpassed;
  for (size_t i = 0; i < e.buffers.size(); ++i)
    if (e.buffers[i].node == k.sum && !e.buffers[i].is_output) unpassed.push_back(static_cast<int>(i));
  CudaKernelSource source = LoopKernelSource(e, launch, b, std::max<int64_t>(1, CeilDiv(threads, c.threads)),
                                             fmt::format("depthwise direct {}x{} taps, {} channels x {} pixels a thread", rows.size(), widest, c.vector, c.pixels), "", 0, unpassed);
  source.includes = {"depthwise.cuh"};
  return source;
}

}  // namespace tilefuse
