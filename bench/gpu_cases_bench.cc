// The GPU bench cases (bench/cases/cases.json): each model compiled fused and unfused for
// the GPU, timed as whole captured CUDA graphs (device events, warm-up, median of repeats,
// inputs rotated so the working set exceeds L2), reported against the measured
// device-to-device copy bandwidth ("% copy", a 1 GiB copy's rate; memory-bound cases also
// against a copy of their own size, "% same"), and, for cases with "flops" (the GEMM
// cases), in TF/s.
// Writes JSON (--json FILE) and a table.
//
//   tilefuse_bench_gpu_cases [--cases a,b] [--repeats N] [--json FILE] [--root DIR] [--precision high] ...
// (--root: a folder whose bench/cases/cases.json lists other cases, e.g. bench/tf32_gemm.py --write-cases's)
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/backend_setup.h"
#include "backend/cuda/copy_bandwidth.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/device_allocator.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "backend/cuda/cuda_executable.h"
#include "tune/gpu_tuner.h"
#include "support/file_util.h"

namespace tilefuse {
namespace {

int Main(int argc, char** argv) {
  std::string only, json_path, root = TILEFUSE_SOURCE_DIR;
  int repeats = 100;
  bool tune = false;
  MatmulPrecision precision = MatmulPrecision::kHighest;
  AttentionPath attention = AttentionPath::kTemplate;
  GemmPath gemm = GemmPath::kAuto;
  TemplateOverrides overrides;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--cases" && i + 1 < argc) only = argv[++i];
    else if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--root" && i + 1 < argc) root = argv[++i];
    else if (a == "--tune") tune = true;
    else if (a == "--precision" && i + 1 < argc) precision = std::string(argv[++i]) == "high" ? MatmulPrecision::kHigh : MatmulPrecision::kHighest;
    else if (a == "--attention" && i + 1 < argc) {
      std::string path = argv[++i];
      attention = path == "split"     ? AttentionPath::kSplit
                  : path == "overlap" ? AttentionPath::kOverlap
                  : path == "serial"  ? AttentionPath::kSerial
                                      : AttentionPath::kTemplate;
    } else if (a == "--attention-block-n" && i + 1 < argc) {
      overrides.attention_block_n = std::stoi(argv[++i]);
    } else if (a == "--attention-poly-exp" && i + 1 < argc) {
      overrides.attention_poly_exp_every = std::stoi(argv[++i]);
    } else if (a == "--attention-lazy-margin" && i + 1 < argc) {
      overrides.attention_lazy_margin = std::stof(argv[++i]);
    } else if (a == "--attention-consumers" && i + 1 < argc) {
      overrides.attention_consumers = std::stoi(argv[++i]);
    } else if (a == "--attention-tiles" && i + 1 < argc) {
      overrides.attention_tiles = std::stoi(argv[++i]);
    } else if (a == "--attention-q-slots" && i + 1 < argc) {
      overrides.attention_q_slots = std::stoi(argv[++i]);
    } else if (a == "--gemm" && i + 1 < argc) {
      std::string path = argv[++i];
      gemm = path == "template" ? GemmPath::kTemplate : path == "library" ? GemmPath::kLibrary : GemmPath::kAuto;
    } else if (a == "--gemm-pingpong" && i + 1 < argc) {
      overrides.gemm_pingpong = std::string(argv[++i]) == "on";
    } else if (a == "--gemm-overlap" && i + 1 < argc) {
      overrides.gemm_overlap_epilogue = std::string(argv[++i]) == "on";
    } else if (a == "--gemm-skinny" && i + 1 < argc) {
      overrides.gemm_skinny = std::string(argv[++i]) == "on";
    } else if (a == "--gemm-block-n" && i + 1 < argc) {
      overrides.gemm_block_n = std::stoi(argv[++i]);
    } else if (a == "--gemm-stages" && i + 1 < argc) {
      overrides.gemm_stages = std::stoi(argv[++i]);
    } else if (a == "--gemm-splits" && i + 1 < argc) {
      overrides.gemm_splits = std::stoi(argv[++i]);
    } else if (a == "--gemm-group-m" && i + 1 < argc) {
      overrides.gemm_group_m = std::stoi(argv[++i]);
    } else if (a == "--gemm-cluster" && i + 1 < argc) {
      overrides.gemm_cluster_m = std::stoi(argv[++i]);
    } else if (a == "--row-cluster" && i + 1 < argc) {
      overrides.row_cluster = std::stoi(argv[++i]);
    } else {
      fmt::print(stderr,
                 "usage: {} [--cases a,b] [--repeats N] [--json FILE] [--root SOURCE_DIR] [--tune] [--precision highest|high]\n  [--attention template|overlap|serial|split]\n"
                 "  [--attention-block-n 64|128|192|256] [--attention-poly-exp N (0: none)] [--attention-lazy-margin M (-1: off)]\n"
                 "  [--attention-consumers 2|3] [--attention-tiles 1|2|4 (query blocks per CTA)]\n"
                 "  [--attention-q-slots 1|2 (Q tiles in shared memory)] [--gemm template|library|auto] [--gemm-pingpong on|off] [--gemm-overlap on|off]\n"
                 "  [--gemm-skinny on|off (products of at most 64 rows on the skinny template)] [--gemm-block-n 64|128|192|256] [--gemm-stages N]\n"
                 "  [--gemm-splits N (1: no split-K)] [--gemm-group-m N] [--gemm-cluster 1|2 (CTAs sharing B)] [--row-cluster 1|2|4|8 (CTAs sharing a row)]\n"
                 "  (override the templates' rules)\n",
                 argv[0]);
      return 2;
    }
  }
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) {
    fmt::print(stderr, "no GPU: {}\n", device.status().ToString());
    return 2;
  }
  StatusOr<std::string> manifest = ReadWholeFile(root + "/bench/cases/cases.json");
  if (!manifest.ok()) {
    fmt::print(stderr, "{}\n", manifest.status().ToString());
    return 2;
  }
  StatusOr<double> copy = MeasureCopyBandwidth(*device);
  if (!copy.ok()) {
    fmt::print(stderr, "{}\n", copy.status().ToString());
    return 2;
  }
  nlohmann::json report = {{"device", (*device)->name()}, {"copy_bandwidth_gbs", *copy / 1e9}, {"cases", nlohmann::json::array()}};
  fmt::print("device {}: copy {:.0f} GB/s (read + write)\n", (*device)->name(), *copy / 1e9);
  fmt::print("{:<40} {:>10} {:>10} {:>8} {:>7} {:>7} {:>6} {:>8}  {}\n", "case", "fused us", "unfused us", "speedup", "% copy", "% same",
             "TF/s", "kernels", "strategy");
  int failures = 0;
  const nlohmann::json cases = nlohmann::json::parse(*manifest)["cases"];
  for (const auto& c : cases) {
    std::string name = c["name"];
    if (!only.empty() && ("," + only + ",").find("," + name + ",") == std::string::npos) continue;
    double bytes = c["bytes_moved"];
    double flops = c.value("flops", 0.0);  // 0: a memory-bound case, no TF/s
    nlohmann::json row = {{"name", name}, {"bytes_moved", bytes}};
    if (flops > 0) row["flops"] = flops;
    auto measure = [&](bool fuse, bool tuned = false) -> StatusOr<std::pair<double, std::unique_ptr<CudaExecutable>>> {
      ASSIGN_OR_RETURN(ImportedModel model, ImportOnnx(root + "/bench/cases/" + std::string(c["file"])));
      ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(model.graph), CudaPassOptions()));
      CudaCompileOptions options;
      options.precision = precision;
      options.fuse = fuse;
      options.attention = attention;
      options.gemm = gemm;
      options.overrides = overrides;
      std::unique_ptr<CudaExecutable> compiled;
      if (tuned) {
        TuneReport report;
        ASSIGN_OR_RETURN(compiled, TuneForGpu(graph, options, TuneOptions{}, &report));
        row["tuning"] = report.ToJson();
      } else {
        ASSIGN_OR_RETURN(compiled, CompileForCuda(graph, options));
      }
      std::vector<Tensor> inputs;
      int64_t input_bytes = 0;
      for (size_t i = 0; i < graph.inputs().size(); ++i) {
        const Node& p = graph.node(graph.inputs()[i]);
        inputs.push_back(Tensor::Random(p.dtype, p.shape, 7 + i));
        input_bytes += inputs.back().num_bytes();
      }
      int sets = static_cast<int>(std::clamp<int64_t>(3 * (*device)->l2_bytes() / std::max<int64_t>(1, input_bytes) + 1, 1, 8));
      ASSIGN_OR_RETURN(double ms, compiled->BenchmarkMs(inputs, 10, repeats, sets));
      return std::make_pair(ms, std::move(compiled));
    };
    auto fused = measure(true);
    auto unfused = measure(false);
    if (!fused.ok() || !unfused.ok()) {
      std::string why = (!fused.ok() ? fused.status() : unfused.status()).ToString();
      fmt::print("{:<40} error: {}\n", name, why);
      row["error"] = why;
      report["cases"].push_back(row);
      ++failures;
      continue;
    }
    double fused_us = fused->first * 1000, unfused_us = unfused->first * 1000;
    double default_us = fused_us;
    if (tune) {
      auto tuned = measure(true, true);
      if (tuned.ok()) {
        row["default_us"] = default_us;
        row["tuned_us"] = tuned->first * 1000;
        row["tuning_gain"] = default_us / (tuned->first * 1000);
        fmt::print("{:<40} tuned {:.1f} us vs default {:.1f} us ({:.2f}x)\n", name, tuned->first * 1000, default_us,
                   default_us / (tuned->first * 1000));
        fused_us = tuned->first * 1000;
        fused = std::move(tuned);
      } else {
        row["tuning_error"] = tuned.status().ToString();
        fmt::print("{:<40} tuning failed: {}\n", name, tuned.status().ToString());
      }
    }
    double gbs = bytes / (fused_us * 1e-6) / 1e9;
    // A memory-bound case against a copy moving as many bytes too (half read, half written):
    // a short kernel cannot reach the large copy's rate, and neither can such a copy.
    if (flops == 0) {
      StatusOr<double> copy_us = MeasureSameSizeCopyMicroseconds(*device, bytes, repeats);
      if (copy_us.ok()) row.update({{"same_size_copy_us", *copy_us}, {"percent_of_same_size_copy", 100 * *copy_us / fused_us}});
      else row["same_size_copy_error"] = copy_us.status().ToString();
    }
    std::string strategies;
    nlohmann::json launches = nlohmann::json::array();  // what a tuned configuration's strategy does not say
    for (const CudaKernelInfo& k : fused->second->kernels()) {
      strategies += (strategies.empty() ? "" : "; ") + k.strategy;
      launches.push_back({{"strategy", k.strategy}, {"threads", k.threads}, {"blocks", k.blocks}});
    }
    row.update({{"fused_us", fused_us}, {"unfused_us", unfused_us}, {"speedup", unfused_us / fused_us}, {"fused_gbs", gbs},
                {"percent_of_copy", 100 * gbs * 1e9 / *copy}, {"fused_kernels", fused->second->kernels().size()},
                {"unfused_kernels", unfused->second->kernels().size()}, {"strategy", strategies}, {"launches", launches}});
    std::string tflops = "-";
    if (flops > 0) {
      row.update({{"fused_tflops", flops / fused_us / 1e6}, {"unfused_tflops", flops / unfused_us / 1e6}});
      tflops = fmt::format("{:.0f}", flops / fused_us / 1e6);
    }
    report["cases"].push_back(row);
    const std::string same = row.contains("percent_of_same_size_copy") ? fmt::format("{:.1f}%", row["percent_of_same_size_copy"].get<double>()) : "-";
    fmt::print("{:<40} {:>10.1f} {:>10.1f} {:>7.2f}x {:>6.1f}% {:>7} {:>6} {:>4}/{:<3}  {}\n", name, fused_us, unfused_us, unfused_us / fused_us,
               100 * gbs * 1e9 / *copy, same, tflops, fused->second->kernels().size(), unfused->second->kernels().size(), strategies);
  }
  if (!json_path.empty()) {
    Status written = WriteFileAtomically(json_path, report.dump(2) + "\n");
    if (!written.ok()) fmt::print(stderr, "{}\n", written.ToString());
  }
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace tilefuse

int main(int argc, char** argv) { return tilefuse::Main(argc, argv); }
