#include "compile_cuda.h"

#include <filesystem>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "codegen/cuda/device_headers.h"
#include "driver/driver.h"
#include "fusion/group_classifier.h"
#include "support/file_util.h"

namespace tilefuse::cli {

namespace {

struct KernelRow {
  std::string name, kind, mode, strategy, ptxas, why_host;
  std::string entry;  // the function's name in its cubin (what a profiler shows)
  int registers = 0;
  int64_t spill_bytes = 0;
};

std::vector<KernelRow> Rows(const CudaProgram& program, const std::vector<PtxasKernelInfo>& report) {
  std::map<std::string, const PtxasKernelInfo*> by_name;
  for (const PtxasKernelInfo& k : report) by_name[k.name] = &k;
  std::vector<KernelRow> rows;
  auto add = [&](const CudaGroupProgram& p, const CudaLaunchable* k, const std::string& mode) {
    KernelRow row;
    row.kind = std::string(GroupKindName(p.kind));
    row.mode = mode;
    row.why_host = p.why_host.empty() && !p.why_library.empty() ? "no GEMM template: " + p.why_library : p.why_host;
    row.name = k ? k->source.name : fmt::format("group{}", p.group);
    row.strategy = k ? k->source.strategy
                     : mode == "gemm" ? (p.lt_epilogue == LtEpilogue::kNone ? std::string("cuBLASLt")
                                                                            : std::string("cuBLASLt, ") + LtEpilogueName(p.lt_epilogue) + " epilogue")
                                      : "host reference kernels";
    if (mode == "gemm epilogue") row.strategy = "cuBLASLt + epilogue " + row.strategy;
    if (k && by_name.count(k->source.name)) {
      const PtxasKernelInfo& info = *by_name[k->source.name];
      row.ptxas = info.line;
      row.registers = info.registers;
      row.spill_bytes = info.spill_store_bytes + info.spill_load_bytes;
    }
    rows.push_back(row);
  };
  for (const CudaGroupProgram& p : program.groups) {
    std::string mode = p.mode == CudaGroupProgram::Mode::kGenerated      ? "generated"
                       : p.mode == CudaGroupProgram::Mode::kGemm         ? "gemm"
                       : p.mode == CudaGroupProgram::Mode::kGemmTemplate ? "gemm template"
                       : p.mode == CudaGroupProgram::Mode::kAttentionTemplate ? "attention template"
                                                                         : "host";
    for (const CudaLaunchable& k : p.prologue) add(p, &k, "gemm prologue");
    if (p.kernel) add(p, &*p.kernel, mode == "gemm" ? "gemm epilogue" : mode);
    if (!p.kernel) add(p, nullptr, mode);
  }
  return rows;
}

}  // namespace

Status CompileForCudaCommand(const CudaCompileRequest& request, const Graph& passed) {
  CudaCompileOptions options;
  options.fuse = request.fuse;
  options.dump_dir = request.dump_dir;
  ApplyCudaPathChoices(request.paths, options);
  RETURN_IF_ERROR(ApplyTemplateChoices(request.paths, options));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::ForArch(request.arch, options));
  ASSIGN_OR_RETURN(BuiltGraphs built, BuildGraphs(*backend, {passed}, options));
  const CudaProgram& program = CudaBackend::ProgramOf(*built.lowered[0]);
  const std::vector<std::string>& split_attention = CudaBackend::PlanNotesOf(*built.lowered[0]);
  // A cubin per distinct kernel (backend/cuda/cuda_compile_units.h); ptxas's report under
  // the kernels' own names, as one translation unit's was.
  const CudaCubins& cubins = CudaBackend::CubinsOf(*built.code);
  const std::string ptxas_log = cubins.PtxasLog();
  std::vector<KernelRow> rows = Rows(program, ParsePtxasLog(ptxas_log));
  std::map<std::string, std::string> entry_of;
  for (const CudaCompileUnit& unit : cubins.units)
    for (const std::string& kernel : unit.kernels) entry_of[kernel] = unit.entry;
  for (KernelRow& r : rows)
    if (auto it = entry_of.find(r.name); it != entry_of.end()) r.entry = it->second;
  const bool all_cached = !cubins.units.empty() && cubins.compiles == 0;
  nlohmann::json j = {{"model", request.model}, {"backend", "cuda"}, {"arch", request.arch}, {"fused", request.fuse},
                      {"nvrtc", backend->nvrtc_version()}, {"cubins", cubins.units.size()}, {"cubin_bytes", cubins.bytes()},
                      {"nvrtc_compiles", cubins.compiles}, {"nvrtc_cache_hits", cubins.cache_hits()},
                      {"from_cache", all_cached}, {"kernels", nlohmann::json::array()}};
  std::string text = fmt::format("model: {} ({}), cuda {} via NVRTC {}; {} cubins (one per distinct kernel): {} compiled, {} from the cache\n",
                                 request.model, request.fuse ? "fused" : "unfused", request.arch, backend->nvrtc_version(),
                                 cubins.units.size(), cubins.compiles, cubins.cache_hits());
  int64_t spills = 0;
  for (const KernelRow& r : rows) {
    spills += r.spill_bytes;
    j["kernels"].push_back({{"name", r.name}, {"kind", r.kind}, {"mode", r.mode}, {"strategy", r.strategy}, {"ptxas", r.ptxas},
                            {"registers", r.registers}, {"spill_bytes", r.spill_bytes}, {"why_host", r.why_host},
                            {"entry", r.entry}});
    text += fmt::format("  {:<34} {:<14} {:<14} {:<44} {}\n", r.name, r.kind, r.mode, r.strategy,
                        r.ptxas.empty() ? r.why_host : r.ptxas + (r.why_host.empty() ? "" : "; " + r.why_host));
  }
  text += fmt::format("{} kernels, {} bytes of local-memory spills\n", rows.size(), spills);
  j["split_attention"] = split_attention;
  for (const std::string& note : split_attention) text += "  " + note + "\n";
  if (!request.emit_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(request.emit_dir, ec);
    if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", request.emit_dir, ec.message()));
    RETURN_IF_ERROR(WriteFileAtomically(request.emit_dir + "/kernels.cu", program.source));
    for (const DeviceHeader& header : kDeviceHeaders)
      RETURN_IF_ERROR(WriteFileAtomically(request.emit_dir + "/" + header.name, header.text));
    RETURN_IF_ERROR(WriteFileAtomically(request.emit_dir + "/ptxas.txt", ptxas_log));
    RETURN_IF_ERROR(WriteFileAtomically(request.emit_dir + "/summary.txt", text));
    RETURN_IF_ERROR(WriteFileAtomically(request.emit_dir + "/summary.json", j.dump(2) + "\n"));
  }
  if (request.json) fmt::print("{}\n", j.dump(2));
  else fmt::print("{}{}", text, request.emit_dir.empty() ? "" : fmt::format("kernels.cu, the device library, ptxas.txt and summaries written to {}\n", request.emit_dir));
  return Status::Ok();
}

}  // namespace tilefuse::cli
