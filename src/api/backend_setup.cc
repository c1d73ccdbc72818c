#include "api/backend_setup.h"

#include <cstdio>
#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_driver.h"
#include "driver/driver.h"
#include "support/env_switch.h"
#include "support/kernel_cache.h"
#include "tune/cpu_tuner.h"

namespace tilefuse {

PassOptions CpuPassOptions() {
  PassOptions options;
  options.library_conv = CpuRunsLibraryConv();
  return options;
}

PassOptions CudaPassOptions() {
  PassOptions options;
  options.channels_last = !SwitchedOff("TILEFUSE_CHANNELS_LAST");
  // Rotary embeddings in their products' epilogues only where asked (TILEFUSE_ROTARY_EPILOGUES=1):
  // on the H200 the LLaMA-style model at 1x128 ran 293 µs with them, 279 without, although its
  // kernels one by one summed to less (410 against 423 µs); at 8x512 3469.9 against 3484.6
  // (2026-12-02, bench/results/2026-12-02-h200-rotary-epilogues.md).
  options.heads_layout = SwitchedOn("TILEFUSE_ROTARY_EPILOGUES");
  options.k_major_weights = {.f32 = true, .unaligned_half = true, .eight_bit = true};
  options.pad_gemm_columns = true;
  options.pad_gemm_depth = true;
  options.column_padding_into_products = true;
  options.fp8_products = true;
  // Block-scaled FP8 products on the template (checked in its forms on the H200, 2026-12-04:
  // 8192^3 1301 µs against 11011 as written); TILEFUSE_FP8_BLOCK_SCALES=0 computes them as
  // written, for comparison.
  options.fp8_block_scales = !SwitchedOff("TILEFUSE_FP8_BLOCK_SCALES");
  // Symmetric int8 products on the int8 tensor cores (checked in the template's forms on an
  // H100, 2026-12-07: 8192^3 660 µs, 1.78x torch._int_mm); TILEFUSE_INT8_PRODUCTS=0 computes
  // them dequantized, in f32, for comparison.
  options.int8_products = !SwitchedOff("TILEFUSE_INT8_PRODUCTS");
  options.keep_attention_grads = true;
  return options;
}

PassOptions PassOptionsForBackend(const std::string& backend, int device) {
  if (backend == "cpu" || (backend == "auto" && !CudaDevice::Get(device).ok())) return CpuPassOptions();
  if (backend == "reference") return PassOptions{};
  return CudaPassOptions();
}

StatusOr<std::unique_ptr<CpuExecutable>> CompileModelForCpu(const Graph& passed, bool fuse, const std::string& cache_dir,
                                                            bool tune, const std::string& dump_dir, const FusionPlan* plan) {
  CpuCompileOptions options;
  options.plan_override = plan;
  options.cache_dir = cache_dir;
  options.dump_dir = dump_dir;
  options.fuse = fuse;
  options.device = "cpu";
  if (!tune) return CompileForCpu(passed, options);
  TuneOptions tuning;
  tuning.cache_dir = KernelCache::DefaultDirectory();
  return TuneForCpu(passed, options, tuning, nullptr);
}

StatusOr<MatmulPrecision> ParseMatmulPrecision(const std::string& word) {
  if (word == "highest") return MatmulPrecision::kHighest;
  if (word == "high") return MatmulPrecision::kHigh;
  return InvalidArgument(fmt::format("precision '{}' is not one of highest, high", word));
}

Status ApplyCudaPathWords(const std::string& gemm, const std::string& attention, const std::string& precision,
                          CudaCompileOptions& options) {
  if (gemm == "auto") options.gemm = GemmPath::kAuto;
  else if (gemm == "template") options.gemm = GemmPath::kTemplate;
  else if (gemm == "library") options.gemm = GemmPath::kLibrary;
  else return InvalidArgument(fmt::format("gemm '{}' is not one of auto, template, library", gemm));
  if (attention == "template") options.attention = AttentionPath::kTemplate;
  else if (attention == "overlap") options.attention = AttentionPath::kOverlap;
  else if (attention == "serial") options.attention = AttentionPath::kSerial;
  else if (attention == "split") options.attention = AttentionPath::kSplit;
  else return InvalidArgument(fmt::format("attention '{}' is not one of template, overlap, serial, split", attention));
  ASSIGN_OR_RETURN(options.precision, ParseMatmulPrecision(precision));
  return Status::Ok();
}

Status ApplyTemplateWords(const std::string& gemm_form, int gemm_cluster, const std::string& depthwise, TemplateOverrides& o) {
  // A form of the GEMM template's consumers names that template: the skinny one is not used.
  if (gemm_form == "tail" || gemm_form == "overlap" || gemm_form == "pingpong" || gemm_form == "streamk") o.gemm_skinny = false;
  if (gemm_form == "tail" || gemm_form == "streamk") {
    o.gemm_overlap_epilogue = false;
    o.gemm_stream_k = gemm_form == "streamk";
  } else if (gemm_form == "overlap") {
    o.gemm_overlap_epilogue = true;
  } else if (gemm_form == "pingpong") {
    o.gemm_pingpong = true;
  } else if (gemm_form != "rule" && gemm_form != "skinny") {
    return InvalidArgument(fmt::format("gemm form '{}' is not one of rule, tail, overlap, pingpong, streamk, skinny", gemm_form));
  }
  if (gemm_cluster < 0 || gemm_cluster > 2) return InvalidArgument(fmt::format("gemm cluster {} is not 0, 1 or 2", gemm_cluster));
  o.gemm_cluster_m = gemm_cluster;
  int vector = 0, pixels = 0;
  char rest = 0;
  if (depthwise == "off") o.depthwise = false;
  else if (depthwise == "on") o.depthwise = true;
  else if (std::sscanf(depthwise.c_str(), "%dx%d%c", &vector, &pixels, &rest) == 2 && vector > 0 && pixels > 0) {
    o.depthwise_vector = vector;
    o.depthwise_pixels = pixels;
  } else {
    return InvalidArgument(fmt::format("depthwise '{}' is not on, off or VxP (channels x pixels a thread, e.g. 8x2)", depthwise));
  }
  return Status::Ok();
}

Status CheckGpuOrdinal(int device) {
  if (device < 0) return InvalidArgument(fmt::format("device {} is not a GPU ordinal (0, 1, ... in CUDA's numbering)", device));
  StatusOr<int> count = CudaDeviceCount();
  if (!count.ok())
    return NotFound(fmt::format("there is no GPU {}: this machine has 0 usable CUDA GPUs: {}", device, count.status().message()));
  if (device >= *count)
    return NotFound(fmt::format("there is no GPU {}: this machine has {} CUDA GPU(s) (numbered from 0)", device, *count));
  return Status::Ok();
}

Status CheckDeviceForBackend(int device, const std::string& backend) {
  if (device == 0) return Status::Ok();
  if (device > 0 && (backend == "cpu" || backend == "reference"))
    return InvalidArgument(fmt::format("device {} names a GPU, but backend '{}' runs on the host (use backend cuda or auto, "
                                       "or leave device at 0)",
                                       device, backend));
  return CheckGpuOrdinal(device);
}

}  // namespace tilefuse
