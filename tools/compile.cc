// `tilefuse compile MODEL [--emit DIR]`: compiles a model for the CPU and shows what
// became of every fusion group: a generated kernel (its C++ source written to DIR) or
// the reference kernels, and why.
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "compile_cuda.h"
#include "tilefuse/tilefuse.h"

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
  std::string shape;           // --shape: symbolic dims' values
  CudaPathChoices cuda_paths;  // cuda: --gemm, --attention, --precision
};

int CountGenerated(const CompiledModel& compiled) {
  int generated = 0;
  for (const KernelSummary& kernel : compiled.kernels()) generated += kernel.generated ? 1 : 0;
  return generated;
}

nlohmann::json SummaryJson(const std::string& model, const CompiledModel& compiled, bool fused) {
  int generated = CountGenerated(compiled);
  nlohmann::json j = {{"model", model},
                      {"fused", fused},
                      {"num_kernels", compiled.kernels().size()},
                      {"generated", generated},
                      {"compile_ms", compiled.backend_compile_ms()},
                      {"jit_compiles", compiled.jit_compiles()},
                      {"cache_hits", compiled.jit_cache_hits()}};
  j["kernels"] = nlohmann::json::array();
  for (const KernelSummary& kernel : compiled.kernels()) {
    j["kernels"].push_back({{"name", kernel.name},
                            {"kind", kernel.kind},
                            {"nodes", kernel.num_nodes},
                            {"generated", kernel.generated},
                            {"why_not", kernel.why_not},
                            {"library", kernel.library},
                            {"file", kernel.source_file}});
  }
  return j;
}

// "generated" or "reference (<why not>)".
std::string DescribeKernelOrigin(const KernelSummary& kernel) {
  if (!kernel.generated) return fmt::format("reference ({})", kernel.why_not);
  // A gemm group whose prologue is partly on the reference kernels says which part.
  std::string origin = kernel.why_not.empty() ? "generated" : fmt::format("generated ({})", kernel.why_not);
  return kernel.library.empty() ? origin : fmt::format("{}: {}", origin, kernel.library);
}

std::string SummaryText(const std::string& model, const CompiledModel& compiled, bool fused) {
  int generated = CountGenerated(compiled);
  std::string text = fmt::format("model: {} ({})\n", model, fused ? "fused" : "unfused: one kernel per op");
  text += fmt::format("kernels: {} ({} generated, {} on the reference kernels)\n", compiled.kernels().size(),
                      generated, compiled.kernels().size() - generated);
  text += fmt::format("compile: {:.1f} ms, {} host compiles, {} cache hits\n", compiled.backend_compile_ms(),
                      compiled.jit_compiles(), compiled.jit_cache_hits());
  for (const KernelSummary& kernel : compiled.kernels()) {
    text += fmt::format("  {:<32} {:<14} {:>3} ops  {}\n", kernel.name, kernel.kind, kernel.num_nodes,
                        DescribeKernelOrigin(kernel));
  }
  return text;
}

// DIR/<kernel>.cc for every generated kernel, then the summaries.
Status Emit(const std::string& dir, const std::string& model, const CompiledModel& compiled, bool fused) {
  std::vector<OutputFile> files = compiled.sources();
  files.push_back({"summary.txt", SummaryText(model, compiled, fused)});
  files.push_back({"summary.json", SummaryJson(model, compiled, fused).dump(2) + "\n"});
  return WriteOutputFiles(dir, files);
}

Status CompileModel(const CompileCommandOptions& options) {
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModelWithShapes(options.model, options.shape));
  // --dump-dir: the IR after every pass, then what each driver stage made, published only
  // when every stage succeeded.
  DumpDirStaging dumps(options.dump_dir);
  ModelOptions model;
  model.backend = options.backend;
  model.fuse = !options.no_fusion;
  ApplyCudaPathChoices(options.cuda_paths, model);
  ASSIGN_OR_RETURN(model.dump_dir, dumps.Prepare());
  ASSIGN_OR_RETURN(Graph passed, CompiledModel::RunPasses(imported.graph, model));
  const bool fused = model.fuse;
  if (options.backend == "cuda") {
    RETURN_IF_ERROR(CompileForCudaCommand({options.model, options.arch, options.emit_dir, model.dump_dir, fused, options.json, options.cuda_paths}, passed));
    return dumps.Publish();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> compiled, CompiledModel::FromPassedGraph(std::move(passed), model));
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
  compile->add_option("--shape", options->shape, kShapeFlagHelp);
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
