#include "codegen/cuda_depthwise_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "codegen/cuda_scalar_program.h"
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
  const std::string_view src_type = StorageType(k.dtype), src_dtype = DTypeName(k.dtype);
  const std::vector<TapRow> rows = TapRows(k);
  int64_t widest = 1;  // of the rows' taps, for the strategy
  for (const TapRow& row : rows) widest = std::max(widest, row.dw_max - row.dw_min + 1);

  std::string b;
  b += fmt::format("  constexpr int kV = {}, kP = {};\n", c.vector, c.pixels);
  b += fmt::format("  constexpr int kH = {}, kW = {}, kC = {}, kOH = {}, kOW = {};\n", k.height, k.width, k.channels, k.out_height, k.out_width);
  b += "  const tf_index_t t = (tf_index_t)blockIdx.x * blockDim.x + threadIdx.x;\n";
  b += fmt::format("  if (t >= {}) return;\n", threads);
  b += fmt::format("  const int c0 = (int)(t % {}) * kV;\n", groups);
  b += fmt::format("  tf_index_t rest = t / {};\n", groups);
  b += fmt::format("  const int ow0 = (int)(rest % {}) * kP;\n  rest /= {};\n", strips, strips);
  b += "  const int oh = (int)(rest % kOH);\n  const tf_index_t n = rest / kOH;\n";
  b += "  float acc[kP][kV];\n#pragma unroll\n  for (int p = 0; p < kP; ++p)\n#pragma unroll\n    for (int v = 0; v < kV; ++v) acc[p][v] = 0.0f;\n";
  for (const TapRow& row : rows) {
    const int64_t seg = (c.pixels - 1) * k.stride_w + (row.dw_max - row.dw_min) + 1;
    b += "  {\n";
    b += fmt::format("    const int ih = oh * {} + ({});\n", k.stride_h, row.dh);
    b += "    if (ih >= 0 && ih < kH) {\n";
    b += fmt::format("      const {}* row = b{} + ((n * kH + ih) * (tf_index_t)kW) * kC + c0;\n", src_type, k.source_buffer);
    b += fmt::format("      float x[{}][kV];\n#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", seg, seg);
    b += fmt::format("        const int iw = ow0 * {} + ({}) + j;\n", k.stride_w, row.dw_min);
    b += fmt::format("        if (iw >= 0 && iw < kW) {{\n          {} raw[kV];\n          tf_vload<kV>(row + (tf_index_t)iw * kC, raw);\n", src_type);
    b += fmt::format("#pragma unroll\n          for (int v = 0; v < kV; ++v) x[j][v] = tf_cvt_{}(raw[v]);\n", src_dtype);
    b += "        } else {\n#pragma unroll\n          for (int v = 0; v < kV; ++v) x[j][v] = 0.0f;\n        }\n      }\n";
    for (const DepthwiseTap* tap : row.taps) {
      const KernelBuffer& w = e.buffers[tap->weight_buffer];
      b += fmt::format("      {{\n        {} w[kV];\n        tf_vload<kV>(b{} + c0, w);\n", StorageType(w.dtype), tap->weight_buffer);
      b += fmt::format("#pragma unroll\n        for (int p = 0; p < kP; ++p)\n#pragma unroll\n          for (int v = 0; v < kV; ++v) "
                       "acc[p][v] += x[p * {} + {}][v] * tf_cvt_{}(w[v]);\n      }}\n",
                       k.stride_w, tap->dw - row.dw_min, DTypeName(w.dtype));
    }
    b += "    }\n  }\n";
  }

  // The epilogue per element, the accumulator in place of the sum.
  std::map<int, std::string> given;
  for (int v : k.sum_loads) given[v] = "acc[p][v]";
  std::vector<int> roots;
  for (const KernelStore& s : e.stores) roots.push_back(s.value);
  const std::string indent = "        ";
  b += "#pragma unroll\n  for (int p = 0; p < kP; ++p) {\n    if (ow0 + p < kOW) {\n";
  b += "      const tf_index_t base = ((n * kOH + oh) * (tf_index_t)kOW + ow0 + p) * kC + c0;\n";
  for (size_t i = 0; i < e.stores.size(); ++i)
    if (StoresAtOwnOffset(e.stores[i], c.vector)) b += fmt::format("      {} o{}[kV];\n", StorageType(e.buffers[e.stores[i].buffer].dtype), i);
  b += "#pragma unroll\n      for (int v = 0; v < kV; ++v) {\n        const tf_index_t i0 = base + v;\n";
  b += CudaElementProgram(e, roots, given, {"i0", "i1"}, indent);
  for (size_t i = 0; i < e.stores.size(); ++i) {
    const KernelStore& s = e.stores[i];
    const std::string_view dt = DTypeName(e.buffers[s.buffer].dtype);
    if (StoresAtOwnOffset(s, c.vector)) b += fmt::format("{}o{}[v] = tf_pack_{}(v{});\n", indent, i, dt, s.value);
    else b += fmt::format("{}b{}[{}] = tf_pack_{}(v{});\n", indent, s.buffer, PrintIndex(s.index, {"i0", "i1"}), dt, s.value);
  }
  b += "      }\n";
  for (size_t i = 0; i < e.stores.size(); ++i) {
    const KernelStore& s = e.stores[i];
    if (!StoresAtOwnOffset(s, c.vector)) continue;
    AffineIndex a;
    AsAffine(s.index, &a);
    b += fmt::format("      tf_vstore<kV>(b{} + base + {}, o{});\n", s.buffer, a.offset, i);
  }
  b += "    }\n  }\n";

  CudaKernelConfig launch;
  launch.threads = c.threads;
  launch.vector = c.vector;
  // The sum's buffer is read from the accumulators, unless the group stores the sum itself.
  std::vector<int> unpassed;
  for (size_t i = 0; i < e.buffers.size(); ++i)
    if (e.buffers[i].node == k.sum && !e.buffers[i].is_output) unpassed.push_back(static_cast<int>(i));
  return LoopKernelSource(e, launch, b, std::max<int64_t>(1, CeilDiv(threads, c.threads)),
                          fmt::format("depthwise direct {}x{} taps, {} channels x {} pixels a thread", rows.size(), widest, c.vector, c.pixels), "", 0, unpassed);
}

}  // namespace tilefuse
