#include "compile_cuda.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tilefuse::cli {

Status CompileForCudaCommand(const CudaCompileRequest& request, const Graph& passed) {
  ModelOptions options;
  options.fuse = request.fuse;
  options.dump_dir = request.dump_dir;
  ApplyCudaPathChoices(request.paths, options);
  ASSIGN_OR_RETURN(CudaBuild build, BuildForCudaArch(passed, options, request.arch));
  const bool all_cached = build.cubins > 0 && build.nvrtc_compiles == 0;
  nlohmann::json j = {{"model", request.model}, {"backend", "cuda"}, {"arch", request.arch}, {"fused", request.fuse},
                      {"nvrtc", build.nvrtc_version}, {"cubins", build.cubins}, {"cubin_bytes", build.cubin_bytes},
                      {"nvrtc_compiles", build.nvrtc_compiles}, {"nvrtc_cache_hits", build.nvrtc_cache_hits},
                      {"from_cache", all_cached}, {"kernels", nlohmann::json::array()}};
  std::string text = fmt::format("model: {} ({}), cuda {} via NVRTC {}; {} cubins (one per distinct kernel): {} compiled, {} from the cache\n",
                                 request.model, request.fuse ? "fused" : "unfused", request.arch, build.nvrtc_version,
                                 build.cubins, build.nvrtc_compiles, build.nvrtc_cache_hits);
  int64_t spills = 0;
  double nvrtc_ms = 0;
  const BuiltKernel none;
  const BuiltKernel* slowest = &none;
  for (const BuiltKernel& r : build.kernels) {
    spills += r.spill_bytes;
    j["kernels"].push_back({{"name", r.name}, {"kind", r.kind}, {"mode", r.mode}, {"strategy", r.strategy}, {"ptxas", r.ptxas},
                            {"registers", r.registers}, {"spill_bytes", r.spill_bytes}, {"why_host", r.why_host},
                            {"entry", r.entry}, {"nvrtc_ms", r.nvrtc_ms}});
    text += fmt::format("  {:<34} {:<14} {:<14} {:<44} {}{}\n", r.name, r.kind, r.mode, r.strategy,
                        r.ptxas.empty() ? r.why_host : r.ptxas + (r.why_host.empty() ? "" : "; " + r.why_host),
                        r.nvrtc_ms > 0 ? fmt::format("; NVRTC {:.0f} ms", r.nvrtc_ms) : "");
    nvrtc_ms += r.nvrtc_ms;
    if (r.nvrtc_ms > slowest->nvrtc_ms) slowest = &r;
  }
  text += fmt::format("{} kernels, {} bytes of local-memory spills\n", build.kernels.size(), spills);
  // Units compile in parallel: the slowest is what a cold compile on many cores waits for.
  if (nvrtc_ms > 0)
    text += fmt::format("NVRTC: {:.0f} ms of compiling in all, the slowest unit {:.0f} ms ({})\n", nvrtc_ms, slowest->nvrtc_ms,
                        slowest->name);
  j["split_attention"] = build.split_attention;
  for (const std::string& note : build.split_attention) text += "  " + note + "\n";
  if (!request.emit_dir.empty()) {
    std::vector<OutputFile> files = build.sources;
    files.push_back({"summary.txt", text});
    files.push_back({"summary.json", j.dump(2) + "\n"});
    RETURN_IF_ERROR(WriteOutputFiles(request.emit_dir, files));
  }
  if (request.json) fmt::print("{}\n", j.dump(2));
  else fmt::print("{}{}", text, request.emit_dir.empty() ? "" : fmt::format("kernels.cu, the device library, ptxas.txt and summaries written to {}\n", request.emit_dir));
  return Status::Ok();
}

}  // namespace tilefuse::cli
