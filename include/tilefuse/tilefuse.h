// tilefuse's public entry point: compile a model once, run it many times.
//
//   tilefuse::ModelOptions options;   // backend "auto": the GPU when one answers, else the CPU
//   options.device = 1;               // the second GPU (CUDA's numbering)
//   tilefuse::StatusOr<std::unique_ptr<tilefuse::CompiledModel>> model =
//       tilefuse::CompiledModel::FromFile("model.onnx", options);
//   if (!model.ok()) return model.status();                     // a message naming the cause
//   auto outputs = (*model)->Run(inputs);                       // host tensors, graph order
//
// The `tilefuse` command line tool and the Python package are two clients of this header:
// a model compiles and runs the same way from either. Errors a user or the hardware can
// cause come back as Status; nothing here throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// How to compile a model. The words are `tilefuse run`'s flags (--backend, --precision, ...);
// a word not listed is refused (InvalidArgument, naming the choices).
struct ModelOptions {
  // auto: cuda when a GPU answers, else cpu, else the reference interpreter (the reason is
  // in CompiledModel::backend_note()); cuda, cpu: generated kernels there, or the error;
  // reference: the f64 interpreter, unfused (slow, exact: the oracle).
  std::string backend = "auto";
  // The GPU to run on, CUDA's numbering. Another ordinal than 0 asks for that GPU: it must
  // exist (the error names how many there are), also under auto, and cpu and reference
  // refuse it (they run on the host; 0, the default, means nothing to them).
  int device = 0;
  bool fuse = true;                    // false: every op its own kernel (the unfused baseline)
  bool tune = false;                   // measure kernel configurations first (cached per machine)
  std::string precision = "highest";   // cuda, f32 matmuls: highest (exact f32) or high (TF32)
  std::string gemm = "auto";           // cuda, gemm groups: auto, template or library (cuBLASLt)
  std::string attention = "template";  // cuda, attention groups: template, overlap, serial or split
  // cuda, the templates' own settings, for comparison and diagnosis: the GEMM template's
  // consumers (rule, tail, overlap, pingpong) and clusters (0: the rule, 1, 2), and the
  // depthwise template (on, off, or VxP channels x pixels a thread).
  std::string gemm_form = "rule";
  int gemm_cluster = 0;
  std::string depthwise = "on";
  bool poison_outputs = false;         // cuda: outputs filled with NaN bits before each run (checks)
  std::string cache_dir;               // kernel cache; empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  std::string dump_dir;                // the IR after every graph pass, written here; empty: none
  // auto on the CPU: a run that fails runs again on the reference interpreter (with a note).
  bool reference_fallback_on_run = true;
};

// A graph input or output as the compiled graph sees it.
struct ValueSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

// One compiled kernel (`tilefuse run --json`'s "kernels").
struct KernelSummary {
  std::string name;
  std::string kind;      // the fusion group's kind: pointwise, row_reduction, gemm, ...
  bool generated = false;
  std::string why_not;   // why it runs on the reference kernels (cpu) or on the host (cuda)
  std::string mode;      // cuda: generated, gemm template, attention template, gemm, host; cpu: ""
  std::string strategy;  // cuda: the template and its configuration
  std::string library;   // cpu: what runs a library-backed group (oneDNN ...), else ""
  int num_nodes = 0;
};

// One kernel of a profiled run: when it started (from the run's start) and how long it took.
struct KernelRunTime {
  std::string name;
  double start_us = 0, duration_us = 0;
};

enum class ExplainFormat { kText, kJson, kDot };

class CompiledModel {
 public:
  // From an .onnx or .onnxtxt file or an ONNX backend-test folder (NotFound when the path
  // does not exist).
  static StatusOr<std::unique_ptr<CompiledModel>> FromFile(const std::string& path, const ModelOptions& options);
  // From a serialized ONNX ModelProto. External data is not found this way: pass a path.
  static StatusOr<std::unique_ptr<CompiledModel>> FromBytes(std::string_view onnx_model, const ModelOptions& options);
  // From a graph as built (tilefuse/builder.h) or imported: runs the graph passes first.
  static StatusOr<std::unique_ptr<CompiledModel>> FromGraph(Graph graph, const ModelOptions& options);

  // FromGraph in two steps, for callers that look at the passed graph before paying for the
  // compile (its inputs to check, its dumps to publish): the passes `options` asks for, then
  // the compile of their result with the same options.
  static StatusOr<Graph> RunPasses(Graph graph, const ModelOptions& options);
  static StatusOr<std::unique_ptr<CompiledModel>> FromPassedGraph(Graph passed, const ModelOptions& options);

  ~CompiledModel();
  CompiledModel(const CompiledModel&) = delete;
  CompiledModel& operator=(const CompiledModel&) = delete;

  // One run on host tensors in graph order, checked against the graph's inputs (a mismatch
  // is InvalidArgument naming the input and `source`, where the inputs came from). With
  // `timings`, each kernel is timed (one by one on the GPU, not as the captured graph).
  // One run at a time: concurrent callers wait.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelRunTime>* timings = nullptr,
                                    std::string_view source = "the call");
  // One run on device memory the caller owns (inputs then outputs: device pointers, dense,
  // graph order, the graph's dtypes and shapes), queued on the caller's CUDA `stream` (a
  // stream of this model's GPU's primary context) and returning before it finishes. Only
  // where device_runs(); otherwise Unimplemented, saying where the model runs.
  Status RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream);
  // Whether RunOnDevice works: the model runs on the GPU as one captured CUDA graph.
  bool device_runs() const;

  // The fusion plan and every decision's reason, as `tilefuse explain [--json]` prints it,
  // for the cost model of `cost_model` (h100-sxm, h200 or cpu) and this model's fuse option.
  StatusOr<std::string> Explain(ExplainFormat format = ExplainFormat::kText, const std::string& cost_model = "h100-sxm") const;

  const std::string& backend() const;       // cuda, cpu or reference (where it runs now)
  const std::string& backend_note() const;  // why auto fell back; empty when it did not
  int device() const;                       // the GPU ordinal asked for
  const Graph& graph() const;               // the graph after the passes
  const std::vector<ValueSpec>& inputs() const;
  const std::vector<ValueSpec>& outputs() const;
  const std::vector<KernelSummary>& kernels() const;  // none on the reference interpreter
  double compile_ms() const;          // the whole compile through this class, passes included
  double backend_compile_ms() const;  // the backend's part (plan, lower, build, load)
  int64_t jit_compiles() const;       // kernels the host compiler or NVRTC built (not cached)

  struct State;  // the implementation's (src/api/compiled_model.cc), opaque here

 private:
  explicit CompiledModel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
