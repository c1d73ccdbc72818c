// `tilefuse compile MODEL [--emit DIR]`: compiles a model for the CPU and shows what
// became of every fusion group: a generated kernel (its C++ source written to DIR) or
// the reference kernels, and why.
#include <cctype>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "codegen/cpp/cpp_prelude.h"
#include "commands.h"
#include "compile_cuda.h"
#include "api/backend_setup.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "support/file_util.h"

namespace tilefuse::cli {
namespace {

struct CompileCommandOptions {
  std::string model;
  std::string emit_dir;
  std::string dump_dir;
  bool no_fusion = false;
  bool json = false;
  std::string backend = "cpu";
  std::string arch = "sm_90a";
  CudaPathChoices cuda_paths;  // cuda: --gemm, --attention, --precision
};

// Kernel names may hold spaces or parentheses; file names keep [A-Za-z0-9_-].
std::string KernelFileName(const std::string& kernel) {
  std::string name;
  for (char c : kernel) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return name + ".cc";
}

int CountGenerated(const CpuExecutable& compiled) {
  int generated = 0;
  for (const KernelInfo& kernel : compiled.kernels()) generated += kernel.generated ? 1 : 0;
  return generated;
}

nlohmann::json SummaryJson(const std::string& model, const CpuExecutable& compiled, bool fused) {
  int generated = CountGenerated(compiled);
  nlohmann::json j = {{"model", model},
                      {"fused", fused},
                      {"num_kernels", compiled.kernels().size()},
                      {"generated", generated},
                      {"compile_ms", compiled.compile_ms()},
                      {"jit_compiles", compiled.jit_compiles()},
                      {"cache_hits", generated - compiled.jit_compiles()}};
  j["kernels"] = nlohmann::json::array();
  for (const KernelInfo& kernel : compiled.kernels()) {
    j["kernels"].push_back({{"name", kernel.name},
                            {"kind", std::string(GroupKindName(kernel.kind))},
                            {"nodes", kernel.num_nodes},
                            {"generated", kernel.generated},
                            {"why_not", kernel.why_not},
                            {"library", kernel.library},
                            {"file", kernel.source.empty() ? "" : KernelFileName(kernel.name)}});
  }
  return j;
}

// "generated" or "reference (<why not>)".
std::string DescribeKernelOrigin(const KernelInfo& kernel) {
  if (!kernel.generated) return fmt::format("reference ({})", kernel.why_not);
  // A gemm group whose prologue is partly on the reference kernels says which part.
  std::string origin = kernel.why_not.empty() ? "generated" : fmt::format("generated ({})", kernel.why_not);
  return kernel.library.empty() ? origin : fmt::format("{}: {}", origin, kernel.library);
}

std::string SummaryText(const std::string& model, const CpuExecutable& compiled, bool fused) {
  int generated = CountGenerated(compiled);
  std::string text = fmt::format("model: {} ({})\n", model, fused ? "fused" : "unfused: one kernel per op");
  text += fmt::format("kernels: {} ({} generated, {} on the reference kernels)\n", compiled.kernels().size(),
                      generated, compiled.kernels().size() - generated);
  text += fmt::format("compile: {:.1f} ms, {} host compiles, {} cache hits\n", compiled.compile_ms(),
                      compiled.jit_compiles(), generated - compiled.jit_compiles());
  for (const KernelInfo& kernel : compiled.kernels()) {
    text += fmt::format("  {:<32} {:<14} {:>3} ops  {}\n", kernel.name, GroupKindName(kernel.kind), kernel.num_nodes,
                        DescribeKernelOrigin(kernel));
  }
  return text;
}

Status Emit(const std::string& dir, const std::string& model, const CpuExecutable& compiled, bool fused) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", dir, ec.message()));
  for (const KernelInfo& kernel : compiled.kernels()) {
    if (kernel.source.empty()) continue;  // on the reference kernels, or a gemm group that is BLAS alone
    std::string path = (std::filesystem::path(dir) / KernelFileName(kernel.name)).string();
    RETURN_IF_ERROR(WriteFileAtomically(path, CppPrelude() + "\n" + kernel.source));
  }
  RETURN_IF_ERROR(WriteFileAtomically(dir + "/summary.txt", SummaryText(model, compiled, fused)));
  return WriteFileAtomically(dir + "/summary.json", SummaryJson(model, compiled, fused).dump(2) + "\n");
}

Status CompileModel(const CompileCommandOptions& options) {
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(options.model));
  // --dump-dir: the IR after every pass, then what each driver stage made, published only
  // when every stage succeeded.
  DumpDirStaging dumps(options.dump_dir);
  PassOptions pass_options = options.backend == "cuda" ? CudaPassOptions() : CpuPassOptions();
  ASSIGN_OR_RETURN(pass_options.dump_dir, dumps.Prepare());
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(imported.graph, pass_options));
  bool fused = !options.no_fusion;
  if (options.backend == "cuda") {
    RETURN_IF_ERROR(CompileForCudaCommand({options.model, options.arch, options.emit_dir, pass_options.dump_dir, fused, options.json, options.cuda_paths}, passed));
    return dumps.Publish();
  }
  CpuCompileOptions cpu;
  cpu.fuse = fused;
  cpu.dump_dir = pass_options.dump_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> compiled, CompileForCpu(passed, cpu));
  RETURN_IF_ERROR(dumps.Publish());
  if (!options.emit_dir.empty()) RETURN_IF_ERROR(Emit(options.emit_dir, options.model, *compiled, fused));
  if (options.json) {
    fmt::print("{}\n", SummaryJson(options.model, *compiled, fused).dump(2));
  } else {
    fmt::print("{}", SummaryText(options.model, *compiled, fused));
    if (!options.emit_dir.empty()) fmt::print("sources and summary written to {}\n", options.emit_dir);
  }
  return Status::Ok();
}

}  // namespace

void AddCompileCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<CompileCommandOptions>();
  CLI::App* compile = app.add_subcommand("compile", "Compile a model for the CPU or (with NVRTC, no GPU needed) CUDA; optionally write the kernels");
  compile->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  compile->add_option("--emit", options->emit_dir,
                      "Write DIR/<kernel>.cc for every generated kernel, and DIR/summary.txt and summary.json");
  compile->add_option("--dump-dir", options->dump_dir,
                      "Write what every stage made into DIR: the IR after each pass (NN-<pass>.txt), the fusion plan "
                      "(plan.txt), the Kernel IR (kernels.ir.txt) and the generated source (kernels.cpp or kernels.cu)");
  compile->add_flag("--no-fusion", options->no_fusion, "Every op its own kernel");
  compile->add_option("--backend", options->backend,
                      "cpu: C++ through the host compiler; cuda: CUDA through NVRTC (needs no GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  compile->add_option("--arch", options->arch, "cuda: the GPU architecture to compile for")->capture_default_str();
  AddCudaPathOptions(*compile, options->cuda_paths);
  compile->add_flag("--json", options->json, "Print the summary as JSON");
  compile->footer(
      "Each .cc is a whole translation unit (the prelude, then the kernel) as the host compiler saw it.\n"
      "Kernels are cached in $TILEFUSE_CACHE_DIR (default ~/.cache/tilefuse): a second compile is a cache hit.\n\n"
      "Examples:\n"
      "  tilefuse compile examples/layernorm_manual.onnxtxt --emit kernels/\n"
      "  tilefuse compile tests/models/gpt2_2layer --no-fusion --json\n"
      "  tilefuse compile examples/layernorm_manual.onnxtxt --dump-dir stages/\n"
      "  tilefuse compile examples/softmax_manual.onnxtxt --backend cuda --arch sm_90a --emit cuda_kernels/\n"
      "  tilefuse compile bench/cases/gemm_bf16_4096.onnxtxt --backend cuda --gemm template --dump-dir gemm/\n"
      "Exit codes: 0 ok, 2 bad input, unsupported model or usage.");
  compile->callback([options, &exit_code] {
    Status status = CompileModel(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli
