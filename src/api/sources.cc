// What a compile leaves for a user to read (tilefuse/tilefuse.h): the generated sources of
// a CPU compile, a CUDA build for an architecture without a GPU (`tilefuse compile --backend
// cuda`), and writing them out whole.
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "api/backend_setup.h"
#include "api/compiled_model_state.h"
#include "backend/cuda/cuda_backend.h"
#include "codegen/cpp/cpp_prelude.h"
#include "codegen/cuda/device_headers.h"
#include "driver/driver.h"
#include "support/file_util.h"

namespace tilefuse {
namespace {

std::string ModeName(CudaGroupProgram::Mode mode) {
  switch (mode) {
    case CudaGroupProgram::Mode::kGenerated: return "generated";
    case CudaGroupProgram::Mode::kGemm: return "gemm";
    case CudaGroupProgram::Mode::kGemmTemplate: return "gemm template";
    case CudaGroupProgram::Mode::kAttentionTemplate: return "attention template";
    case CudaGroupProgram::Mode::kAttentionBackwardTemplate: return "attention backward template";
    default: return "host";
  }
}

// One row per launch of the program (a gemm's prologue kernels first), with ptxas's report
// of it under the kernel's own name.
std::vector<BuiltKernel> Kernels(const CudaProgram& program, const std::vector<PtxasKernelInfo>& report) {
  std::map<std::string, const PtxasKernelInfo*> by_name;
  for (const PtxasKernelInfo& k : report) by_name[k.name] = &k;
  std::vector<BuiltKernel> rows;
  auto add = [&](const CudaGroupProgram& p, const CudaLaunchable* k, const std::string& mode) {
    BuiltKernel row;
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
    const std::string mode = ModeName(p.mode);
    // (The attention backward template's first two kernels are its own, not a product's prologue.)
    for (const CudaLaunchable& k : p.prologue) add(p, &k, p.mode == CudaGroupProgram::Mode::kAttentionBackwardTemplate ? mode : "gemm prologue");
    if (p.kernel) add(p, &*p.kernel, mode == "gemm" ? "gemm epilogue" : mode);
    // (grouped over N or launched together: in an earlier group's launch; a gate or a norm: in a later one's)
    if (!p.kernel && p.grouped_into < 0 && p.gated_into < 0 && p.launched_with < 0 && p.normed_into < 0) add(p, nullptr, mode);
  }
  return rows;
}

}  // namespace

std::vector<OutputFile> CompiledModel::sources() const {
  std::vector<OutputFile> files;
  if (!state_->cpu) return files;
  const std::vector<KernelInfo>& kernels = state_->cpu->kernels();
  for (size_t i = 0; i < kernels.size() && i < state_->kernels.size(); ++i) {
    // On the reference kernels, or a gemm group that is BLAS alone: no source.
    if (kernels[i].source.empty()) continue;
    files.push_back({state_->kernels[i].source_file, CppPrelude() + "\n" + kernels[i].source});
  }
  return files;
}

StatusOr<CudaBuild> BuildForCudaArch(const Graph& passed, const ModelOptions& model, const std::string& arch) {
  CudaCompileOptions options;
  options.fuse = model.fuse;
  options.dump_dir = model.dump_dir;
  options.cache_dir = model.cache_dir;
  RETURN_IF_ERROR(ApplyCudaPathWords(model.gemm, model.attention, model.precision, options));
  RETURN_IF_ERROR(ApplyTemplateWords(model.gemm_form, model.gemm_cluster, model.depthwise, options.overrides));
  options.stand_ins_only = model.stand_ins_only;
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::ForArch(arch, options));
  ASSIGN_OR_RETURN(BuiltGraphs built, BuildGraphs(*backend, {passed}, options));
  const CudaProgram& program = CudaBackend::ProgramOf(*built.lowered[0]);
  // A cubin per distinct kernel (backend/cuda/cuda_compile_units.h); ptxas's report under
  // the kernels' own names, as one translation unit's was.
  const CudaCubins& cubins = CudaBackend::CubinsOf(*built.code);
  const std::string ptxas_log = cubins.PtxasLog();
  CudaBuild build;
  build.arch = arch;
  build.nvrtc_version = backend->nvrtc_version();
  build.cubins = static_cast<int64_t>(cubins.units.size());
  build.cubin_bytes = static_cast<int64_t>(cubins.bytes());
  build.nvrtc_compiles = cubins.compiles;
  build.nvrtc_cache_hits = cubins.cache_hits();
  build.kernels = Kernels(program, ParsePtxasLog(ptxas_log));
  std::map<std::string, size_t> unit_of;
  for (size_t u = 0; u < cubins.units.size(); ++u)
    for (const std::string& kernel : cubins.units[u].kernels) unit_of[kernel] = u;
  std::vector<bool> timed(cubins.units.size(), false);
  for (BuiltKernel& k : build.kernels) {
    auto it = unit_of.find(k.name);
    if (it == unit_of.end()) continue;
    k.entry = cubins.units[it->second].entry;
    // A unit's time once, on the first kernel it serves: the column sums to the build's work.
    if (!timed[it->second] && it->second < cubins.cubins.size()) k.nvrtc_ms = cubins.cubins[it->second].compile_ms;
    timed[it->second] = true;
  }
  build.split_attention = CudaBackend::PlanNotesOf(*built.lowered[0]);
  build.sources.push_back({"kernels.cu", program.source});
  for (const DeviceHeader& header : kDeviceHeaders) build.sources.push_back({header.name, header.text});
  build.sources.push_back({"ptxas.txt", ptxas_log});
  return build;
}

Status WriteOutputFile(const std::string& path, const std::string& text) { return WriteFileAtomically(path, text); }

Status WriteOutputFiles(const std::string& dir, const std::vector<OutputFile>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", dir, ec.message()));
  for (const OutputFile& file : files) RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + file.name, file.text));
  return Status::Ok();
}

}  // namespace tilefuse
