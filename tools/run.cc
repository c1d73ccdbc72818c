// `tilefuse run MODEL`: import → passes → execute, then report the outputs or, with
// --check, compare them with expected outputs (or, when a model has none, with the
// reference interpreter run on the graph as imported, which checks the passes).
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "cuda_path_options.h"
#include "input_binding.h"
#include "run_report.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCheckExpected = "expected_outputs";
constexpr const char* kCheckReference = "reference_before_passes";

struct RunOptions {
  std::string model;
  std::string inputs_dir;
  std::string shape;  // --shape: symbolic dims' values
  std::string dump_dir;
  std::string backend = "auto";
  std::string trace_file;
  int trace_warmup = 0;                // cpu: untimed runs before the one whose kernels are timed
  CudaPathChoices cuda_paths;          // cuda: --gemm, --attention, --precision
  uint64_t seed = 0;
  bool check = false;
  std::string check_rule = "auto";     // node, model, or auto (node for ONNX node tests)
  std::optional<double> rtol, atol;    // override the rule's tolerances
  bool no_fusion = false;
  bool tune = false;
  bool json = false;
  bool strict = false;                 // a group on the reference interpreter is an error, not a warning
  int device = 0;                      // cuda: the GPU's ordinal
  CLI::Option* seed_option = nullptr;  // to tell an explicit --random from the default
};

struct DataSet {
  std::string label;             // "test_data_set_0"; empty for --inputs or random inputs
  std::string dir;               // the folder its input_i.pb came from; empty for random
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;  // empty: no expected outputs
};

// The facade's options for `run`'s flags.
ModelOptions ModelOptionsFor(const RunOptions& options) {
  ModelOptions model;
  model.backend = options.backend;
  model.device = options.device;
  model.fuse = !options.no_fusion;
  model.tune = options.tune;
  ApplyCudaPathChoices(options.cuda_paths, model);
  model.poison_outputs = options.check;
  model.strict = options.strict;
  // A --trace asks for the CPU's kernels: a failed run is the error, not the interpreter's.
  model.reference_fallback_on_run = options.trace_file.empty();
  return model;
}

// Runs the passed graph through the facade (tilefuse/tilefuse.h) on the backend it chose:
// compiled once, run per data set; the first run's kernels are timed for the report.
class Executor {
 public:
  // "auto" is cuda when a GPU is there, else cpu, falling back to the reference
  // interpreter (with a note) when the graph does not compile for the CPU; a backend
  // asked for explicitly reports its error.
  Status Prepare(const RunOptions& options, Graph passed, RunReport& report) {
    ASSIGN_OR_RETURN(model_, CompiledModel::FromPassedGraph(std::move(passed), ModelOptionsFor(options)));
    for (const std::string& warning : model_->warnings()) fmt::print(stderr, "warning: {}\n", warning);
    report.backend = model_->backend();
    report.backend_note = model_->backend_note();
    report.num_kernels = static_cast<int>(model_->kernels().size());
    report.compile_ms = model_->backend_compile_ms();
    report.jit_compiles = model_->jit_compiles();
    return Status::Ok();
  }

  const Graph& graph() const { return model_->graph(); }

  // The first run records per-kernel timings into the report (and the trace file). A CPU
  // run that failed under auto ran on the interpreter instead: the report says so.
  StatusOr<std::vector<Tensor>> Execute(const RunOptions& options, const std::vector<Tensor>& inputs, RunReport& report) {
    StatusOr<std::vector<Tensor>> outputs =
        recorded_ || model_->backend() == "reference" ? model_->Run(inputs) : RunRecorded(options, inputs, report);
    if (model_->backend() != report.backend) {
      report.backend = model_->backend();
      report.backend_note = model_->backend_note();
    }
    return outputs;
  }

 private:
  StatusOr<std::vector<Tensor>> RunRecorded(const RunOptions& options, const std::vector<Tensor>& inputs, RunReport& report) {
    recorded_ = true;
    if (model_->backend() == "cpu")
      for (int i = 0; i < options.trace_warmup; ++i) RETURN_IF_ERROR(model_->Run(inputs).status());
    std::vector<KernelRunTime> timings;
    ASSIGN_OR_RETURN(std::vector<Tensor> outputs, model_->Run(inputs, &timings));
    if (model_->backend() == "reference") return outputs;  // fell back: no kernels to report
    for (const KernelRunTime& timing : timings) {
      KernelReport k{timing.name, "", false, "", timing.duration_us / 1000};
      for (const KernelSummary& info : model_->kernels())
        if (info.name == timing.name) k = {info.name, info.kind, info.generated, info.why_not, timing.duration_us / 1000};
      report.kernels.push_back(std::move(k));
    }
    if (!options.trace_file.empty()) RETURN_IF_ERROR(WriteKernelTrace(*model_, timings, options.trace_file));
    return outputs;
  }

  std::unique_ptr<CompiledModel> model_;
  bool recorded_ = false;
};

StatusOr<DataSet> LoadInputsDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(fmt::format("inputs folder '{}' does not exist", dir));
  DataSet set;
  set.dir = dir;
  ASSIGN_OR_RETURN(set.inputs, LoadTensorsFromDir(dir, "input_"));
  if (fs::exists(fs::path(dir) / "output_0.pb", ec)) {
    ASSIGN_OR_RETURN(set.expected, LoadTensorsFromDir(dir, "output_"));
  }
  return set;
}

bool HasTestDataSets(const std::string& model) {
  std::error_code ec;
  return fs::is_directory(fs::path(model) / "test_data_set_0", ec);
}

// The data sets of --inputs DIR or, unless --random was asked, of a backend-test
// folder. None means random inputs, made once the graph is known.
StatusOr<std::vector<DataSet>> LoadDataSets(const RunOptions& options, std::string& source) {
  std::vector<DataSet> sets;
  if (!options.inputs_dir.empty()) {
    ASSIGN_OR_RETURN(DataSet set, LoadInputsDir(options.inputs_dir));
    source = options.inputs_dir;
    sets.push_back(std::move(set));
    return sets;
  }
  bool random_asked = options.seed_option && options.seed_option->count() > 0;
  if (random_asked || !HasTestDataSets(options.model)) return sets;
  ASSIGN_OR_RETURN(std::vector<TestDataSet> loaded, LoadTestDataSets(options.model));
  for (TestDataSet& t : loaded) {
    sets.push_back({fs::path(t.dir).filename().string(), t.dir, std::move(t.inputs), std::move(t.expected_outputs)});
  }
  source = fmt::format("{} test data set(s) in {}", sets.size(), options.model);
  return sets;
}

// Imports the model. When it is refused as unsupported and data sets provide its
// inputs, binds their integer inputs as constants and tries again (input_binding.h);
// the bound inputs then leave every data set.
StatusOr<ImportedModel> ImportBindingIfNeeded(const RunOptions& options, std::vector<DataSet>& sets,
                                              RunReport& report) {
  // Symbolic dims: from --shape, else from the first data set's input shapes (a range's typical
  // value where there is none; the ranges are checked after the import).
  ImportOptions shapes;
  ASSIGN_OR_RETURN(ShapeFlag flag, ParseShapeFlag(options.shape));
  shapes.dims = sets.empty() ? flag.AtTypical() : flag.dims;
  if (!sets.empty())
    for (const Tensor& t : sets.front().inputs) shapes.input_shapes.push_back(t.shape());
  StatusOr<ImportedModel> plain = LoadModel(options.model, shapes);
  if (plain.ok() || plain.status().code() != StatusCode::kUnimplemented || sets.empty()) return plain;
  std::vector<NamedInputs> named;
  for (const DataSet& set : sets) {
    StatusOr<std::vector<std::string>> names = ReadInputNames(set.dir, set.inputs.size());
    if (!names.ok()) return plain;
    named.push_back({std::move(names).value(), set.inputs});
  }
  ImportOptions binding = BindIntegerInputs(named.front());
  binding.dims = shapes.dims;
  binding.input_shapes = shapes.input_shapes;
  StatusOr<ImportedModel> bound = plain;
  // Each round binds one more input that the last import named as needed; at most
  // every input once.
  for (size_t round = 0; round <= named.front().names.size(); ++round) {
    if (!binding.bound_inputs.empty()) {
      for (const NamedInputs& n : named)
        if (!AgreesWithBinding(n, binding)) return plain;
      bound = ImportOnnx(options.model, binding);
    }
    if (bound.ok()) break;
    std::string needed = ValueNeededAtImport(bound.status());
    if (binding.bound_inputs.count(needed) || !BindNamedFloatInput(named.front(), needed, binding)) break;
  }
  if (binding.bound_inputs.empty()) return plain;
  if (!bound.ok()) return bound.status().code() == StatusCode::kUnimplemented ? bound : plain;
  for (size_t i = 0; i < sets.size(); ++i) sets[i].inputs = UnboundInputs(named[i], binding);
  for (const auto& entry : binding.bound_inputs) report.bound_inputs.push_back(entry.first);
  return bound;
}

// Random inputs when no data set was given; otherwise checks each set fits the graph.
Status PrepareDataSets(const RunOptions& options, const Graph& graph, std::vector<DataSet>& sets,
                       std::string& source) {
  if (sets.empty()) {
    source = fmt::format("random (seed {})", options.seed);
    ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeRandomInputs(graph, options.seed));
    sets.push_back({"", "", std::move(inputs), {}});
    return Status::Ok();
  }
  for (const DataSet& set : sets) RETURN_IF_ERROR(ValidateInputs(graph, set.inputs, fmt::format("'{}'", set.dir)));
  return Status::Ok();
}

// Compares one data set's outputs with its expected outputs, or with the reference
// interpreter on the imported graph when it has none.
// ONNX backend node tests live in .../data/node/test_*/: one op against its definition.
bool IsNodeTest(const std::string& model) {
  fs::path p = fs::path(model).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.extension() == ".onnx") p = p.parent_path();
  return p.parent_path().filename() == "node";
}

// The comparison --check makes for one output, and (once) its description in `rule`.
OutputComparison CompareOutput(const RunOptions& options, bool expected_outputs, bool generated, DType computed_as, const Tensor& actual,
                               const Tensor& expected, std::string& rule) {
  CompareOptions compare{CompareRule::kKernels, computed_as, options.rtol, options.atol};
  if (!expected_outputs) {
    rule = generated ? "the reference interpreter, each output held to its dtype's rtol of its largest magnitude (f64 sums vs f32 kernels)"
                     : "the reference interpreter, the node-test tolerances";
    // The unfused reference run (no generated kernels) is held to the node-test tolerances,
    // unless the user gave their own (then as for kernels).
    if (!generated && !options.rtol && !options.atol) compare.rule = CompareRule::kElementwise;
    return CompareOutput(actual, expected, compare);
  }
  const bool node_rule = options.check_rule == "node" || (options.check_rule == "auto" && IsNodeTest(options.model));
  if (node_rule) {
    rule = "node-test rule: |a - e| <= atol + rtol |e| per element (f32 rtol 1e-3 atol 1e-7, f16/bf16 rtol 1e-2)";
    compare.rule = CompareRule::kElementwise;
    return CompareOutput(actual, expected, compare);
  }
  compare.rule = CompareRule::kModel;
  const double rtol = options.rtol.value_or(ModelRtolFor(computed_as));
  rule = fmt::format("whole-model rule: |a - e| <= r max|e| + r |e| per output (r = {:g} for {}; --check-rule node for the "
                     "node-test rule)",
                     rtol, DTypeName(expected.dtype()));
  return CompareOutput(actual, expected, compare);
}

// A failed check against the reference: how far legitimate computations of the graph
// (other roundings, other summation orders) land from the reference under the same rule
// (reference/conditioning.h), so the report can say whether the check could tell a
// correct kernel from a wrong one there. Nine more reference runs: skipped, with the
// reason, where one took longer than a few seconds.
Status MeasureConditioning(const RunOptions& options, const Graph& imported, const std::vector<Tensor>& inputs,
                           const std::vector<Tensor>& expected, const std::vector<DType>& computed_as, double reference_seconds,
                           RunReport& report, size_t first_output) {
  constexpr double kMostSeconds = 5;
  if (reference_seconds > kMostSeconds) {
    for (size_t o = 0; o < expected.size(); ++o)
      if (!report.outputs[first_output + o].comparison->pass)
        report.outputs[first_output + o].conditioning =
            fmt::format("not measured: the reference took {:.1f} s, and measuring takes nine more runs", reference_seconds);
    return Status::Ok();
  }
  std::string rule;
  ASSIGN_OR_RETURN(OutputConditioning sensitivity,
                   MeasureOutputConditioning(imported, inputs, expected, [&](size_t o, const Tensor& got, const Tensor& e) {
                     return RatioToTolerance(CompareOutput(options, false, true, computed_as[o], got, e, rule));
                   }));
  for (size_t o = 0; o < expected.size(); ++o) {
    OutputReport& output = report.outputs[first_output + o];
    if (output.comparison->pass) continue;
    output.sensitivity_ratio = sensitivity.ratios[o];
    output.conditioning = sensitivity.summaries[o];
  }
  return Status::Ok();
}

Status CheckDataSet(const RunOptions& options, const DataSet& set, const Graph& passed, const Graph& imported,
                    const std::vector<Tensor>& actual, RunReport& report) {
  const bool precision_high = options.cuda_paths.precision == "high";
  std::vector<Tensor> expected = set.expected;
  double reference_seconds = 0;
  if (expected.empty()) {
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(expected, RunReferenceInterpreter(imported, set.inputs));
    reference_seconds = MillisecondsSince(start) / 1e3;
  }
  if (expected.size() != actual.size()) {
    OutputReport mismatch{"(all outputs)", set.label, DType::kF32, {}, OutputComparison{}, 0, 0, 0};
    mismatch.comparison->reason =
        fmt::format("the model has {} output(s) but {} expected output(s) were given", actual.size(), expected.size());
    mismatch.comparison->mismatches = 1;
    report.outputs.push_back(std::move(mismatch));
    return Status::Ok();
  }
  const size_t first = report.outputs.size();
  const bool generated = report.backend == "cpu" || report.backend == "cuda";
  std::vector<DType> computed_as;
  bool failed = false;
  for (size_t i = 0; i < actual.size(); ++i) {
    OutputReport output{passed.outputs()[i].name, set.label, actual[i].dtype(), actual[i].shape(), {}, 0, 0, 0};
    // The reference interpreter is f64: generated f32 kernels get tolerances scaled to
    // each tensor (testing/tensor_compare.h); expected outputs the node-test or model rule.
    // TF32 matmuls (--precision high on the GPU) round their inputs like f16.
    const bool tf32 = report.backend == "cuda" && precision_high && actual[i].dtype() == DType::kF32;
    computed_as.push_back(tf32 ? DType::kF16 : expected[i].dtype());
    output.comparison = CompareOutput(options, !set.expected.empty(), generated, computed_as[i], actual[i], expected[i], report.check_rule);
    failed = failed || !output.comparison->pass;
    report.outputs.push_back(std::move(output));
  }
  if (failed && set.expected.empty() && generated) {
    RETURN_IF_ERROR(MeasureConditioning(options, imported, set.inputs, expected, computed_as, reference_seconds, report, first));
  }
  return Status::Ok();
}

Status RunInto(const RunOptions& options, RunReport& report) {
  RETURN_IF_ERROR(CheckModelOptions(ModelOptionsFor(options)));  // before an import that may take long
  StatusOr<std::vector<DataSet>> loaded = LoadDataSets(options, report.input_source);
  if (!loaded.ok()) {
    // A model that cannot be imported explains more than its data does (e.g. sequence
    // inputs, which the .pb reader takes for tensors).
    RETURN_IF_ERROR(LoadModelWithShapes(options.model, options.shape).status());
    return loaded.status();
  }
  std::vector<DataSet> sets = std::move(loaded).value();
  ASSIGN_OR_RETURN(ImportedModel imported, ImportBindingIfNeeded(options, sets, report));
  ASSIGN_OR_RETURN(ShapeFlag shape, ParseShapeFlag(options.shape));
  RETURN_IF_ERROR(shape.CheckRanges(imported.graph));
  report.opset = imported.info.opset;
  report.nodes_imported = imported.graph.num_nodes();

  DumpDirStaging dumps(options.dump_dir);
  ModelOptions pass_options = ModelOptionsFor(options);
  ASSIGN_OR_RETURN(pass_options.dump_dir, dumps.Prepare());
  ASSIGN_OR_RETURN(Graph passed_graph, CompiledModel::RunPasses(imported.graph, pass_options));
  RETURN_IF_ERROR(dumps.Publish());
  report.nodes_after_passes = passed_graph.num_nodes();

  RETURN_IF_ERROR(PrepareDataSets(options, passed_graph, sets, report.input_source));
  if (options.check) report.check_mode = sets.front().expected.empty() ? kCheckReference : kCheckExpected;
  Executor executor;
  RETURN_IF_ERROR(executor.Prepare(options, std::move(passed_graph), report));
  if (report.backend == "reference" && !options.trace_file.empty()) {
    return InvalidArgument("--trace needs the cpu backend (the reference interpreter has no kernels)");
  }
  const Graph& passed = executor.graph();
  for (const DataSet& set : sets) {
    auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<Tensor> outputs, executor.Execute(options, set.inputs, report));
    double ms = MillisecondsSince(start);
    report.run_ms += ms;
    if (report.backend == "reference") report.reference_ms += ms;
    if (options.check) {
      RETURN_IF_ERROR(CheckDataSet(options, set, passed, imported.graph, outputs, report));
      continue;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      OutputReport output{passed.outputs()[i].name, set.label, outputs[i].dtype(), outputs[i].shape(), {}, 0, 0, 0};
      Summarize(outputs[i], output);
      report.outputs.push_back(std::move(output));
    }
  }
  return Status::Ok();
}

int RunModel(const RunOptions& options) {
  RunReport report;
  report.model = options.model;
  report.backend = options.backend;
  report.error = RunInto(options, report);
  if (!report.error.ok()) PrintError(report.error);
  if (options.json) {
    PrintJsonReport(report);
  } else if (report.error.ok()) {
    PrintTextReport(report);
  }
  if (!report.error.ok()) return kExitBadInput;
  return report.AllPassed() ? kExitOk : kExitMismatch;
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* run = app.add_subcommand("run", "Import a model, run the graph passes and execute it; optionally check it");
  run->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  CLI::Option* inputs = run->add_option(
      "--inputs", options->inputs_dir,
      "Folder of input_0.pb, input_1.pb, ... (TensorProto); output_i.pb there are expected outputs");
  options->seed_option = run->add_option(
      "--random", options->seed, "Random inputs with this seed (the default when no inputs are found: seed 0)");
  inputs->excludes(options->seed_option);
  run->add_flag("--check", options->check, "Compare outputs and exit 1 when one differs");
  run->add_option("--check-rule", options->check_rule,
                  "With expected outputs: node (the ONNX backend-test rule, per element) or model (each output's error\n"
                  "relative to its scale); auto: node for ONNX node tests (a folder under .../node/), else model")
      ->check(CLI::IsMember({"auto", "node", "model"}))
      ->default_val("auto");
  run->add_option("--rtol", options->rtol, "--check: the relative tolerance instead of the rule's");
  run->add_option("--atol", options->atol, "--check: the absolute tolerance instead of the rule's");
  run->add_flag("--json", options->json, "Print a machine-readable JSON report on stdout");
  run->add_option("--shape", options->shape, kShapeFlagHelp);
  run->add_option("--dump-dir", options->dump_dir, "Write the IR after every pass into this folder");
  run->add_option("--backend", options->backend,
                  "cuda: generated kernels on the GPU; cpu: generated kernels on the host; reference: the f64\n"
                  "interpreter; auto: cuda when a GPU and its driver are there, else cpu, else reference")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "reference"}))
      ->capture_default_str();
  run->add_flag("--no-fusion", options->no_fusion, "cpu/cuda: every op its own generated kernel (the unfused baseline)");
  AddCudaPathOptions(*run, options->cuda_paths);
  AddDeviceOption(*run, options->device);
  run->add_flag("--strict", options->strict,
                "cpu/cuda: a group that would run on the reference interpreter (no generated kernel for an op) is an\n"
                "error (exit 2), not a warning; so is auto falling back to the interpreter");
  run->add_flag("--tune", options->tune, "Tune the kernels first (tilefuse tune; cached, so once per model and machine)");
  run->add_option("--trace", options->trace_file, "cpu/cuda: write a Chrome trace (Perfetto) of the kernels of one run");
  run->add_option("--trace-warmup", options->trace_warmup,
                  "cpu: untimed runs before the one whose kernels are timed (report and --trace): the steady state,\n"
                  "not the first run's page faults and library initialisation")
      ->check(CLI::NonNegativeNumber);
  run->footer(
      "Inputs come from --inputs DIR, else a backend-test folder's test_data_set_*, else random (seed 0).\n"
      "When a model needs integer inputs (axes, shapes) as constants, they are bound from those files.\n"
      "--check compares every output with the expected output_i.pb files. An ONNX node test (a folder under\n"
      ".../node/) gets the backend-test rule per element (|actual - expected| <= atol + rtol * |expected|;\n"
      "f32 rtol 1e-3 atol 1e-7, f64 rtol 1e-9, f16/bf16 rtol 1e-2). A model gets the whole-model rule: each\n"
      "element's error relative to its output's scale, |a - e| <= r * max|e| + r * |e| (r: f32 1e-4, f64 1e-9,\n"
      "f16/bf16 2e-2), since two correct implementations of a model differ by ~1e-6 of the scale where the\n"
      "outputs are near zero. --check-rule, --rtol and --atol override. Integers and bool compare exactly;\n"
      "NaN only matches NaN. Without expected outputs it compares with the reference interpreter on the\n"
      "graph as imported, before the passes; generated kernels then get an atol of rtol * max|expected| per\n"
      "tensor (f32 sums vs the f64 reference). Each output's worst element is printed. When an output fails\n"
      "that check, the reference runs again as other correct kernels may compute (inputs a few ulps off, every\n"
      "rounded intermediate 1-2 ulps off, sums in their dtype's order) and the report says how far that moves\n"
      "it: past the tolerance, the check cannot tell a correct kernel from a wrong one there (ill-conditioned;\n"
      "still exit 1). Skipped where the reference took over 5 s.\n\n"
      "Examples:\n"
      "  tilefuse run examples/softmax_manual.onnxtxt --check\n"
      "  tilefuse run examples/gelu_manual.onnxtxt --backend cpu --no-fusion --trace gelu.json\n"
      "  tilefuse run onnx/backend/test/data/node/test_add --check --json\n"
      "  tilefuse run model.onnx --inputs my_inputs/ --dump-dir ir_dumps/\n"
      "Exit codes: 0 ok or all outputs match, 1 mismatch, 2 bad input, unsupported model or usage.");
  run->callback([options, &exit_code] { exit_code = RunModel(*options); });
}

}  // namespace tilefuse::cli
