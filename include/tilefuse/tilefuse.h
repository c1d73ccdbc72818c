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
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  // consumers (rule, tail, overlap, pingpong; skinny: as rule, products of at most 64 rows on
  // the skinny GEMM template) and clusters (0: the rule, 1, 2), and the
  // depthwise template (on, off, or VxP channels x pixels a thread).
  std::string gemm_form = "rule";
  int gemm_cluster = 0;
  std::string depthwise = "on";
  // Values of the model's symbolic input dims (ONNX dim_param) by name, for FromFile and
  // FromBytes: a model is compiled for one value of each (a dim not named here is refused,
  // saying so).
  std::map<std::string, int64_t> dims;
  // cuda: a template kernel whose best form takes seconds to compile and is not in the kernel
  // cache runs a stand-in that compiles in a fraction of a second (the GEMM template's ping-pong
  // form for its overlapped epilogue, the serial loop for attention) while the best form
  // compiles on other threads; a run swaps it in once it is ready, and the cache keeps it. For
  // long-lived processes (the Python package turns it on): the first result comes sooner.
  // Benchmark, GroupTimesUs and timed runs wait for the best forms; so does the model's release.
  bool background_compile = false;
  // cuda: those kernels run their stand-ins, and their own forms are never compiled (the fastest
  // compile; the checks of the stand-ins).
  bool stand_ins_only = false;
  bool poison_outputs = false;         // cuda: outputs filled with NaN bits before each run (checks)
  std::string cache_dir;               // kernel cache; empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  // Written here: the IR after every graph pass, then what each compile stage made (plan.txt,
  // kernels.ir.txt, the generated source), as `tilefuse compile --dump-dir`; empty: none.
  std::string dump_dir;
  // auto on the CPU: a run that fails runs again on the reference interpreter (with a note).
  bool reference_fallback_on_run = true;
  // A group of a compiled model runs on the reference interpreter only where no generated
  // kernel exists for an op; warnings() names each. strict makes that, and auto falling back
  // to the interpreter, an error (Unimplemented, naming them) instead.
  bool strict = false;
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
  // The fusion group it runs (an index into the plan, what GroupTimesUs reports by), and that
  // group's planner counts: the rates `bench` derives need the work as planned, not as run.
  // group -1 (and no counts) where the backend does not say.
  int group = -1;
  double flops = 0, bytes = 0;  // bytes: the group's inputs read plus outputs written
  // cpu: the file its generated source goes to in sources() ("" when it has none).
  std::string source_file;
};

// How Benchmark times whole runs. A run's time alone says little on a shared machine or a
// GPU whose caches still hold the last run's data: hence warm-up, a median, rotated inputs.
struct BenchmarkOptions {
  int warmup = 3;    // untimed runs first (caches, page faults, lazy initialisation)
  int repeats = 10;  // timed runs; the median is reported
  // Copies of the inputs the runs rotate among, so that a run does not find its inputs in a
  // cache the previous one warmed. 0: on the GPU enough copies that three L2s' worth of data
  // lies between two uses of one (at most 8); on the CPU one.
  int input_sets = 0;
};

struct BenchmarkResult {
  double median_ms = 0;
  int input_sets = 1;  // the copies used
};

// A file the library makes for a user to keep: a generated source, a summary, a drawing.
struct OutputFile {
  std::string name;  // relative to the folder it is written into
  std::string text;
};

// One kernel of a profiled run: when it started (from the run's start) and how long it took.
struct KernelRunTime {
  std::string name;
  double start_us = 0, duration_us = 0;
};

enum class ExplainFormat { kText, kJson, kDot };

struct CachedCompile;  // a compiled-model cache entry (the implementation's, src/api/model_cache.h)
class ModelFile;      // a model file read once, compiled many times (below)

// The plans of a graph's compiles at earlier bindings of its symbolic sizes (a
// torch.compile(dynamic=True) graph's sequence lengths; a ModelFile keeps its own). FromGraph given
// one compiles a new binding whose passed graph has the structure of an earlier one with that
// binding's plan instead of planning again (src/api/binding_plans.h says why that is sound).
class BindingPlans {
 public:
  BindingPlans();
  ~BindingPlans();
  BindingPlans(const BindingPlans&) = delete;
  BindingPlans& operator=(const BindingPlans&) = delete;
  struct State;
  State& state() const { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

class CompiledModel {
 public:
  // From an .onnx or .onnxtxt file or an ONNX backend-test folder (NotFound when the path
  // does not exist).
  static StatusOr<std::unique_ptr<CompiledModel>> FromFile(const std::string& path, const ModelOptions& options);
  // From a model file read before (ModelFile::Open): what a compile per binding of its symbolic
  // dims calls, so that its weights are read and decoded once.
  static StatusOr<std::unique_ptr<CompiledModel>> FromModelFile(ModelFile& file, const ModelOptions& options);
  // From a serialized ONNX ModelProto. External data is not found this way: pass a path.
  static StatusOr<std::unique_ptr<CompiledModel>> FromBytes(std::string_view onnx_model, const ModelOptions& options);
  // From a graph as built (tilefuse/builder.h) or imported: runs the graph passes first.
  static StatusOr<std::unique_ptr<CompiledModel>> FromGraph(Graph graph, const ModelOptions& options);
  // FromGraph reusing and keeping the plans of the graph's other bindings in `plans`.
  static StatusOr<std::unique_ptr<CompiledModel>> FromGraph(Graph graph, const ModelOptions& options, BindingPlans& plans);

  // FromGraph in two steps, for callers that look at the passed graph before paying for the
  // compile (its inputs to check, its dumps to publish): the passes `options` asks for, then
  // the compile of their result with the same options.
  // `pass_ms`, if given, receives each pass's milliseconds in order.
  static StatusOr<Graph> RunPasses(Graph graph, const ModelOptions& options,
                                   std::vector<std::pair<std::string, double>>* pass_ms = nullptr);
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
  // stream of this model's GPU's primary context) and returning before it finishes. An
  // output may be given an input's pointer, to update that input in place (copied there after
  // the run where OutputMayOverwriteInput says the kernels may not write it directly). Only
  // where device_runs(); otherwise Unimplemented, saying where the model runs.
  Status RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream);
  // Whether RunOnDevice works: the model runs on the GPU as one captured CUDA graph.
  bool device_runs() const;
  // How RunOnDevice's runs went so far: each run is one of the first three.
  struct DeviceRunCounts {
    int64_t replays = 0;          // a CUDA graph captured on the same pointers launched (a capture's first launch too)
    int64_t one_by_one = 0;       // pointers new (or too many captured): the kernels launched one by one
    int64_t through_buffers = 0;  // a pointer not 256-byte aligned: inputs and outputs copied through the model's own buffers
    int64_t captures = 0;         // graphs captured on callers' pointers
    int64_t output_copies = 0;    // outputs copied after a run (inputs returned, repeats, values no kernel writes,
                                  // outputs given an input's memory they may not overwrite)
    int64_t staged_copies = 0;    // small values whose pointers keep changing, copied through the model's buffers
    // Host time: in RunOnDevice, and of it in the driver's launch calls (graph launches, the
    // staged copies' kernels), in deciding what to stage, divert and copy (the pointers noted,
    // a staged run repeated or worked out) and in finding the graph captured on the pointers,
    // in nanoseconds summed over the runs.
    int64_t host_ns = 0, host_ns_in_launches = 0, host_ns_deciding = 0, host_ns_finding_graph = 0;
  };
  DeviceRunCounts device_run_counts() const;
  // Whether RunOnDevice may be given input `input`'s own pointer for output `output` (graph
  // positions): the run then leaves the output's value in that input's memory, an update in
  // place without a copy (a KV cache written at a decode step's position). False where some
  // kernel could read the input after the output overwrites it, or off device_runs().
  bool OutputMayOverwriteInput(int output, int input) const;
  // Waits for kernels compiling in the background (ModelOptions::background_compile) and runs
  // them from then on; kernels() then describes them. Ok at once when none are.
  Status FinishCompiles();
  int pending_compiles() const;  // kernels running stand-ins until their compile ends

  // The fusion plan and every decision's reason, as `tilefuse explain [--json]` prints it,
  // for the cost model of `cost_model` (h100-sxm, h200 or cpu) and this model's fuse option.
  StatusOr<std::string> Explain(ExplainFormat format = ExplainFormat::kText, const std::string& cost_model = "h100-sxm") const;

  // Whole runs timed as a benchmark should: on the GPU with device events around the run
  // (the captured CUDA graph replayed where there is one), on the CPU by the steady clock;
  // see BenchmarkOptions. Unimplemented on the reference interpreter (nothing compiled to time).
  StatusOr<BenchmarkResult> Benchmark(const std::vector<Tensor>& inputs, const BenchmarkOptions& options = {});
  // Each fusion group's time alone (µs, by plan index: KernelSummary::group), the median of
  // six runs timed step by step after a warm-up: where a run's time goes. Their sum exceeds
  // Benchmark's time by the gaps between launches.
  StatusOr<std::vector<double>> GroupTimesUs(const std::vector<Tensor>& inputs);
  // The fusion plan's peak intermediate memory, from a liveness plan over its groups in
  // order: comparable between a fused and an unfused compile of one graph, whatever the
  // backend's own buffer placement (arena_bytes()).
  StatusOr<int64_t> PlannedIntermediateBytes() const;

  // The generated sources as files a compiler would take: on the CPU one <kernel>.cc per
  // generated kernel (the prelude, then the kernel: the translation unit the host compiler
  // saw). On the GPU nothing here: BuildForCudaArch has the CUDA sources with ptxas's report.
  std::vector<OutputFile> sources() const;

  const std::string& backend() const;       // cuda, cpu or reference (where it runs now)
  const std::string& backend_note() const;  // why auto fell back; empty when it did not
  // One line per group that runs on the reference interpreter although the backend is cpu or
  // cuda (no generated kernel for an op): the group, its ops and why. Empty when none does.
  const std::vector<std::string>& warnings() const;
  int device() const;                       // the GPU ordinal asked for
  const Graph& graph() const;               // the graph after the passes
  const std::vector<ValueSpec>& inputs() const;
  const std::vector<ValueSpec>& outputs() const;
  const std::vector<KernelSummary>& kernels() const;  // none on the reference interpreter
  double compile_ms() const;          // the whole compile through this class, passes included
  double backend_compile_ms() const;  // the backend's part (plan, lower, build, load)
  // Where the compile's time went, stage by stage, in order: "import" (FromFile, FromModelFile),
  // "graph passes" (FromGraph, FromFile),
  // then the backend's "plan and lower", "build" (host compiler or NVRTC), "load".
  std::vector<std::pair<std::string, double>> compile_stages_ms() const;
  int64_t jit_compiles() const;       // kernels the host compiler or NVRTC built (not cached)
  int64_t jit_cache_hits() const;     // kernels found in the kernel cache instead (cpu: generated ones not built)
  double flops() const;               // the planner's flop count of the whole plan (0 on the reference)
  int64_t arena_bytes() const;        // the intermediate memory the compiled model holds

  struct State;  // the implementation's (src/api/compiled_model.cc), opaque here

 private:
  explicit CompiledModel(std::unique_ptr<State> state);
  // FromPassedGraph with the plan a compiled-model cache entry holds (null: plan).
  static StatusOr<std::unique_ptr<CompiledModel>> FromPassedGraph(Graph passed, const ModelOptions& options,
                                                                  CachedCompile* cached);
  // FromGraph, reusing and keeping the plans of a model file's bindings where `plans` is given.
  static StatusOr<std::unique_ptr<CompiledModel>> Compile(Graph graph, const ModelOptions& options, BindingPlans* plans);
  std::unique_ptr<State> state_;
};

// Checks `options` as the From* functions do first (the words, the GPU ordinal for the
// backend), so that a command can refuse them before an import or a measurement that takes long.
Status CheckModelOptions(const ModelOptions& options);

// The f64 reference interpreter on `graph` exactly as given (no passes; composite ops run as
// defined): the oracle that the passes and every backend are checked against. Slow; exact.
StatusOr<std::vector<Tensor>> RunReferenceInterpreter(const Graph& graph, const std::vector<Tensor>& inputs);

// How one output is held to an expected one. Which rule fits depends on who computed what:
// two runs of the f64 interpreter agree to the dtype's tolerance, but generated f32 kernels
// sum long dot products in f32, whose rounding scales with the terms, not the result.
enum class CompareRule {
  kElementwise,  // |a - e| <= atol + rtol |e| per element, the dtype's tolerances (ONNX node tests)
  kKernels,      // generated kernels vs the reference: the dtype's rtol, atol = rtol * max|expected|
  // A whole model against outputs computed elsewhere (onnxruntime, PyTorch): each element's
  // error relative to its output's scale, |a - e| <= r max|e| + r |e| (r: f32 1e-4, f16/bf16 2e-2).
  kModel,
};
struct CompareOptions {
  CompareRule rule = CompareRule::kKernels;
  // kKernels and kModel: the precision the kernels computed in, which sets rtol (an f32
  // output of TF32 matmuls, --precision high, is held to f16's); kElementwise takes the
  // expected output's dtype.
  std::optional<DType> computed_as;
  std::optional<double> rtol, atol;  // the user's overrides of the rule's tolerances
};
struct OutputComparison {
  bool pass = false;
  double max_abs_err = 0, max_rel_err = 0;
  int64_t mismatches = 0;  // elements outside tolerance (NaN and infinity disagreements included)
  std::string reason;      // empty on pass; else what differs first
  // The element nearest to (or furthest past) its tolerance, -1 when every pair is equal or
  // not finite; worst_ratio is its |a - e| over its tolerance (<= 1 passes; +inf for a NaN,
  // infinity or shape disagreement).
  int64_t worst_index = -1;
  double worst_actual = 0, worst_expected = 0, worst_ratio = 0;
};
OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, const CompareOptions& options);
inline OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, CompareRule rule) {
  return CompareOutput(actual, expected, CompareOptions{rule, std::nullopt, std::nullopt, std::nullopt});
}
// A comparison as one number in units of its tolerance: <= 1 passes, +inf for a NaN.
double RatioToTolerance(const OutputComparison& c);
// kModel's r for outputs computed in `dtype`: f64 1e-9, f32 1e-4, f16 and bf16 2e-2.
double ModelRtolFor(DType dtype);

// How well-conditioned a graph's outputs are for a check against the reference: how far
// legitimate computations of the same graph (inputs moved by a few ulps, intermediates
// rounded differently, sums accumulated in order in their dtype) land from `expected`, the
// reference's outputs on `inputs`, in units of the check's tolerance (`ratio`: <= 1 passes).
// Nine reference runs. When these already fail the check, a failing kernel there cannot be
// told from a right one (ConditioningExplainsFailure).
using ToleranceRatio = std::function<double(size_t output, const Tensor& got, const Tensor& expected)>;
struct OutputConditioning {
  std::vector<double> ratios;          // per output, the worst legitimate computation's
  std::vector<std::string> summaries;  // per output, what each probe gave
};
StatusOr<OutputConditioning> MeasureOutputConditioning(const Graph& graph, const std::vector<Tensor>& inputs,
                                                       const std::vector<Tensor>& expected, const ToleranceRatio& ratio);
// Whether a check a kernel failed by `kernel_ratio` times its tolerance is explained by the
// conditioning (legitimate computations fail it too, and the kernel is not far beyond them).
bool ConditioningExplainsFailure(double kernel_ratio, double sensitivity_ratio);

// The timed kernels of a profiled Run (`timings`) as a Chrome trace (chrome://tracing,
// Perfetto) at `path`, each event with what kernels() knows of its kernel.
Status WriteKernelTrace(const CompiledModel& model, const std::vector<KernelRunTime>& timings, const std::string& path);

// The planner's plan of a graph after the passes, in numbers: what `tilefuse demo` tabulates.
// The planner's own groups on the cost model, without a backend's capabilities (Explain and
// ExplainModel show what a backend would run).
struct PlanSummary {
  int unfused_kernels = 0, fused_kernels = 0;
  std::vector<std::string> group_kinds;  // each fused group's kind, in plan order
  double predicted_us = 0, unfused_predicted_us = 0;
};
StatusOr<PlanSummary> SummarizePlan(const Graph& passed, const std::string& cost_model = "h100-sxm");

// `tilefuse explain`: the plan of the model at a path and every decision's reason, planned
// without compiling (unless measured).
struct ExplainOptions {
  std::string cost_model = "h100-sxm";      // h100-sxm, h200 (their GPU backend's plan) or cpu
  bool fuse = true;
  std::vector<std::string> disabled_kinds;  // group kinds never formed (IsFusionGroupKind)
  // Tune on the GPU (else the CPU), time each fused group against its ops unfused, and
  // explain the plan after the fallback rule with the measured decisions: the cost model's
  // predictions checked by the machine.
  bool measured = false;
  // The GPU's f32 products as `run --precision` computes them: highest (cuBLASLt, the epilogue
  // apart where cuBLASLt does not fuse it) or high (TF32, the GEMM template fusing it).
  std::string precision = "highest";
  std::map<std::string, int64_t> dims;  // the model's symbolic input dims (ModelOptions::dims)
};
struct PlanExplanation {
  std::string text;  // as `explain` prints it (the measured decisions after the plan)
  std::string json;  // as `explain --json` prints it (measured_fallbacks with measured)
  std::string dot;   // Graphviz DOT, one cluster per group
};
StatusOr<PlanExplanation> ExplainModel(const std::string& path, const ExplainOptions& options);
// Whether `name` is a kind of fusion group that ExplainOptions::disabled_kinds takes
// (pointwise, row_reduction, reduction, gemm, attention, ...).
bool IsFusionGroupKind(std::string_view name);

// `tilefuse tune`: measured search over every generated kernel's configurations, the winners
// remembered in the tuning cache (ModelOptions::tune then reads them), then the fallback rule.
// A second tune of the same model on the same machine measures nothing.
struct TuningOptions {
  std::string backend = "auto";  // cuda, cpu, or auto: cuda when a GPU answers, else cpu
  int device = 0;                // the GPU, CUDA's numbering
  double budget_s = 0;           // seconds of measuring at most; 0: 30 per kernel
  bool fallback = true;          // replace a fused group measured > 10% slower than its ops unfused
  std::map<std::string, int64_t> dims;  // the model's symbolic input dims (ModelOptions::dims)
  std::string precision = "highest";    // cuda, f32 matmuls: as ModelOptions::precision (what run --precision compiles)
  // Before each kernel is tuned (done, total, its name): a progress bar. May be empty.
  std::function<void(int, int, const std::string&)> progress;
};
struct KernelTuning {
  std::string name;
  int candidates = 0, pruned = 0, measured = 0;
  double seconds = 0;
  double best_us = 0, default_us = 0;  // 0 when unknown
  std::string best;                    // the winning configuration, as JSON
};
struct TuningReport {
  std::string device;  // what was tuned: the GPU's name or the CPU's
  std::string note;    // auto without a GPU: why the cpu was tuned instead; else empty
  double seconds = 0;
  int64_t measurements = 0;  // configurations timed now (0: all from the cache)
  int64_t cache_hits = 0;
  bool budget_exhausted = false;
  std::vector<KernelTuning> kernels;
  std::string fallbacks;  // the fused-vs-unfused decisions measured, as text; empty when none
  std::string json;       // the whole report as `tune --json` prints it (model, device included)
};
StatusOr<TuningReport> Tune(const std::string& path, const TuningOptions& options);

// `tilefuse compile --backend cuda`: the CUDA kernels of a graph after the passes (with
// `options`' cuda words) generated and compiled by NVRTC for an architecture, with no GPU
// needed: what a machine without the target can learn of the kernels (registers, spills).
struct BuiltKernel {
  std::string name, kind, mode, strategy;
  std::string why_host;  // why it runs on the host or through the library, else ""
  std::string entry;     // the function's name in its cubin (what a profiler shows)
  std::string ptxas;     // ptxas's resource line
  int registers = 0;
  int64_t spill_bytes = 0;
  double nvrtc_ms = 0;  // its cubin's NVRTC time in this build (0: from the cache, or shared with a kernel listed before)
};
struct CudaBuild {
  std::string arch, nvrtc_version;
  int64_t cubins = 0, cubin_bytes = 0;  // one cubin per distinct kernel
  int64_t nvrtc_compiles = 0, nvrtc_cache_hits = 0;
  std::vector<BuiltKernel> kernels;
  std::vector<std::string> split_attention;  // attention groups split into kernels, and why
  std::vector<OutputFile> sources;           // kernels.cu, the device library's headers, ptxas.txt
};
StatusOr<CudaBuild> BuildForCudaArch(const Graph& passed, const ModelOptions& options, const std::string& arch = "sm_90a");

// A symbolic dim of a model input (ONNX dim_param): dim `dim` of the input `input`, the
// `position`-th of the graph's inputs that are not initializers, named `name` (empty where
// the dim has neither a value nor a name). ModelOptions::dims gives them values.
struct InputDim {
  std::string input;
  int position = 0;
  int dim = 0;
  std::string name;
};
// The symbolic dims of MODEL's inputs, in order; empty where every input shape is static.
StatusOr<std::vector<InputDim>> SymbolicDimsOf(const std::string& model_path);

// A model file read and parsed once, to compile many times: once per binding of its symbolic
// dims, as a decode loop's growing past asks. The first compile decodes its weights; every later
// one shares them (their bytes, not copies) instead of reading and parsing the file again —
// GPT-2 small's 650 MB took about 2 s a compile before any planning. The file is not read again:
// a later change to it is not seen. Thread-safe.
class ModelFile {
 public:
  // MODEL as FromFile takes it; NotFound when the path does not exist.
  static StatusOr<std::shared_ptr<ModelFile>> Open(const std::string& path);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const;
  const std::vector<InputDim>& symbolic_dims() const;
  // The graph with the symbolic dims at `dims` (ModelOptions::dims).
  StatusOr<Graph> Import(const std::map<std::string, int64_t>& dims);

  struct State;

 private:
  friend class CompiledModel;  // its compiles reuse the plans of earlier bindings (State::plans)
  explicit ModelFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The attention backward template on device memory (the torch frontend's replacement for
// PyTorch's attention backward kernels), queued on `stream` of GPU `device`: dQ, dK, dV from
// Q, K, V, O, dO and the forward's logsumexp. Layouts and the scratch's size as
// backend/cuda/attention_backward.h says (AttentionBackwardScratchBytes); InvalidArgument
// naming the cause for a problem the template does not take.
struct AttentionBackwardCall {
  DType dtype = DType::kBF16;
  int heads = 1, group = 1, nq = 1, nk = 1, d = 64;
  bool causal = false;
  double scale = 0.125;
  uint64_t q = 0, k = 0, v = 0, out = 0, dout = 0, lse = 0, dq = 0, dk = 0, dv = 0, scratch = 0;
};
StatusOr<int64_t> AttentionBackwardScratchBytes(const AttentionBackwardCall& call);
Status RunAttentionBackward(int device, const AttentionBackwardCall& call, uint64_t stream);

// A GPU as the benchmarks describe it (NotFound, with the driver's reason, where there is none).
struct GpuInfo {
  std::string name;
  int64_t l2_bytes = 0;
  int sm_count = 0;
};
StatusOr<GpuInfo> DescribeGpu(int device = 0);

// The copy rates memory-bound work is judged by ("% of copy"), in bytes read plus bytes
// written per second. GPU: a 1 GiB device-to-device copy, median of 20.
StatusOr<double> MeasureGpuCopyBandwidth(int device = 0);
// The median time (µs) of one device-to-device copy moving `moved_bytes` in all (half read,
// half written): a short graph cannot reach the large copy's rate, and neither can such a copy.
StatusOr<double> MeasureGpuCopyMicroseconds(int device, double moved_bytes, int repeats);
// Host: memcpy of a buffer of `bytes` (larger than the last-level cache), median of 5.
double MeasureHostCopyBandwidth(int64_t bytes);

// Writes `text` to `path` whole or not at all (a temporary file beside it, renamed over it).
Status WriteOutputFile(const std::string& path, const std::string& text);
// Creates `dir` when missing and writes each file into it, in order.
Status WriteOutputFiles(const std::string& dir, const std::vector<OutputFile>& files);

}  // namespace tilefuse
