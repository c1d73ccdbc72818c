// tilefuse._tilefuse: the nanobind glue between Python and the library's public facade
// (tilefuse/tilefuse.h, the CLI's too; nothing else of the library). Arrays come in
// through DLPack or the buffer protocol (NumPy arrays, torch CPU tensors) and are copied
// into Tensors; outputs go back without a copy, each array owning its Tensor. Every
// Status error is raised as tilefuse.Error with the text the CLI prints after "error: ".
// The Python layer (python/tilefuse/) hands in C-contiguous CPU arrays only.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tilefuse/tilefuse.h"

namespace nb = nanobind;

namespace tilefuse::python {
namespace {

nb::list DescribeValues(const std::vector<ValueSpec>& values) {
  nb::list list;
  for (const ValueSpec& v : values) {
    nb::list shape;
    for (int64_t d : v.shape) shape.append(d);
    list.append(nb::make_tuple(v.name, std::string(DTypeName(v.dtype)), nb::tuple(shape)));
  }
  return list;
}

nb::list DescribeKernels(const std::vector<KernelSummary>& kernels) {
  nb::list list;
  for (const KernelSummary& k : kernels) {
    nb::dict d;
    d["name"] = k.name;
    d["kind"] = k.kind;
    d["generated"] = k.generated;
    d["why_not"] = k.why_not;
    d["mode"] = k.mode;
    d["strategy"] = k.strategy;
    d["num_nodes"] = k.num_nodes;
    list.append(d);
  }
  return list;
}

using Dims = std::map<std::string, int64_t>;

// An attention backward call's problem (its pointers and scale set by the caller).
tilefuse::AttentionBackwardCall AttentionCall(const std::string& dtype, int heads, int group, int nq, int nk, int d, bool causal) {
  std::optional<tilefuse::DType> parsed = tilefuse::ParseDType(dtype);
  if (!parsed) ValueOrThrow(tilefuse::StatusOr<int>(tilefuse::InvalidArgument("attention_backward: unknown dtype " + dtype)));
  tilefuse::AttentionBackwardCall call;
  call.dtype = *parsed;
  call.heads = heads, call.group = group, call.nq = nq, call.nk = nk, call.d = d, call.causal = causal;
  return call;
}

// Kernels whose best form takes seconds compile in the background (ModelOptions::
// background_compile) unless the caller says otherwise: a Python process runs a model many
// times, and its first result should not wait for them.
ModelOptions MakeOptions(const std::string& backend, bool tune, bool fuse, int device, bool strict,
                         const std::string& precision = "highest", const Dims& dims = {}, bool background_compile = true) {
  ModelOptions options;
  options.background_compile = background_compile;
  options.precision = precision;
  options.dims = dims;
  options.strict = strict;
  options.backend = backend;
  options.tune = tune;
  options.fuse = fuse;
  options.device = device;
  return options;
}

std::unique_ptr<CompiledModel> CompileModel(const std::string& path, const std::string& backend, bool tune, bool fuse, int device,
                                            bool strict, const std::string& precision, const Dims& dims, bool background_compile) {
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;  // the host compiler or NVRTC may take seconds
    compiled = CompiledModel::FromFile(path, MakeOptions(backend, tune, fuse, device, strict, precision, dims, background_compile));
  }
  return ValueOrThrow(std::move(compiled));
}

std::unique_ptr<CompiledModel> CompileModelFile(ModelFile& file, const std::string& backend, bool tune, bool fuse, int device,
                                                bool strict, const std::string& precision, const Dims& dims, bool background_compile) {
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;
    compiled = CompiledModel::FromModelFile(file, MakeOptions(backend, tune, fuse, device, strict, precision, dims, background_compile));
  }
  return ValueOrThrow(std::move(compiled));
}

nb::list DescribeInputDims(const std::vector<tilefuse::InputDim>& dims) {
  nb::list list;
  for (const tilefuse::InputDim& d : dims) list.append(nb::make_tuple(d.input, d.position, d.dim, d.name));
  return list;
}

std::unique_ptr<CompiledModel> CompileModelBytes(const nb::bytes& model, const std::string& backend, bool tune, bool fuse,
                                                 int device, bool strict, const std::string& precision, const Dims& dims,
                                                 bool background_compile) {
  const std::string_view bytes(model.c_str(), model.size());
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;
    compiled = CompiledModel::FromBytes(bytes, MakeOptions(backend, tune, fuse, device, strict, precision, dims, background_compile));
  }
  return ValueOrThrow(std::move(compiled));
}

std::unique_ptr<CompiledModel> CompileGraph(const Graph& graph, const std::string& backend, bool tune, bool fuse, int device,
                                            bool strict, const std::string& dump_dir, const std::string& precision,
                                            bool background_compile, const std::string& gemm, tilefuse::BindingPlans* plans) {
  ModelOptions options = MakeOptions(backend, tune, fuse, device, strict, precision, {}, background_compile);
  options.dump_dir = dump_dir;
  options.gemm = gemm;
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;
    compiled = plans ? CompiledModel::FromGraph(graph, options, *plans) : CompiledModel::FromGraph(graph, options);
  }
  return ValueOrThrow(std::move(compiled));
}

// The inputs are read where the arrays hold them (no copy: a small model's call is mostly its
// inputs' copies otherwise); `arrays` keeps them alive through the run. An output that is an
// input itself (a graph passing one through) is copied, so that it does not alias the caller's.
nb::list RunModel(CompiledModel& model, const std::vector<InputArray>& arrays, bool torch, const std::string& source) {
  std::vector<Tensor> inputs = BorrowTensors(arrays);
  StatusOr<std::vector<Tensor>> outputs = InvalidArgument("not run");
  {
    nb::gil_scoped_release release;
    outputs = model.Run(inputs, nullptr, source);
  }
  inputs.clear();
  nb::list list;
  for (Tensor& t : ValueOrThrow(std::move(outputs))) list.append(ToArray(t.borrowed() ? OwnedCopy(t) : std::move(t), torch));
  return list;
}

// `tilefuse compile --backend cuda` for a graph: the passes, then the CUDA kernels generated and
// compiled by NVRTC for `arch`, no GPU needed. Returns each kernel's summary as a dict.
nb::list BuildGraphForCudaArch(const Graph& graph, const std::string& arch, bool fuse, const std::string& dump_dir,
                               bool stand_ins) {
  ModelOptions options = MakeOptions("cuda", false, fuse, 0, false);
  options.dump_dir = dump_dir;
  options.stand_ins_only = stand_ins;
  StatusOr<CudaBuild> built = InvalidArgument("not built");
  {
    nb::gil_scoped_release release;
    StatusOr<Graph> passed = CompiledModel::RunPasses(graph, options);
    built = passed.ok() ? BuildForCudaArch(*passed, options, arch) : StatusOr<CudaBuild>(passed.status());
  }
  nb::list list;
  for (const BuiltKernel& k : ValueOrThrow(std::move(built)).kernels) {
    nb::dict d;
    d["name"] = k.name;
    d["kind"] = k.kind;
    d["mode"] = k.mode;
    d["strategy"] = k.strategy;
    d["why_host"] = k.why_host;
    d["registers"] = k.registers;
    d["spill_bytes"] = k.spill_bytes;
    d["nvrtc_ms"] = k.nvrtc_ms;
    list.append(d);
  }
  return list;
}

// One run with each kernel timed on its own (device events on the GPU): (name, start µs,
// duration µs) per step, as `tilefuse run --trace` records them.
nb::list ProfileModel(CompiledModel& model, const std::vector<InputArray>& arrays) {
  std::vector<Tensor> inputs = ToTensors(arrays);
  std::vector<KernelRunTime> timings;
  StatusOr<std::vector<Tensor>> outputs = InvalidArgument("not run");
  {
    nb::gil_scoped_release release;
    outputs = model.Run(inputs, &timings, "the profiled call");
  }
  ValueOrThrow(std::move(outputs));
  nb::list list;
  for (const KernelRunTime& t : timings) list.append(nb::make_tuple(t.name, t.start_us, t.duration_us));
  return list;
}

}  // namespace
}  // namespace tilefuse::python

NB_MODULE(_tilefuse, m) {
  using namespace tilefuse::python;
  using tilefuse::CompiledModel;
  using tilefuse::ModelFile;
  m.doc() = "tilefuse's C++ library; use the tilefuse package, not this module";
  nb::register_exception_translator(TranslateStatusError);
  // Compiled models live in torch.compile's caches until the interpreter exits: not leaks.
  nb::set_leak_warnings(false);
  BindGraphBuilder(m);
  BindIdentityKey(m);

  nb::class_<CompiledModel>(m, "CompiledModel")
      .def(
          "finish_compiles",
          [](CompiledModel& model) {
            tilefuse::Status finished = tilefuse::Status::Ok();
            {
              nb::gil_scoped_release release;
              finished = model.FinishCompiles();
            }
            if (!finished.ok()) ValueOrThrow(tilefuse::StatusOr<int>(finished));
          },
          "Waits for kernels compiling in the background; they run from then on")
      .def_prop_ro("pending_compiles", &CompiledModel::pending_compiles)
      .def_prop_ro("jit_compiles", &CompiledModel::jit_compiles)
      .def_prop_ro("jit_cache_hits", &CompiledModel::jit_cache_hits)
      .def("profile", &ProfileModel, nb::arg("inputs"), "One run, each kernel timed: [(name, start_us, duration_us)]")
      .def("run", &RunModel, nb::arg("inputs"), nb::arg("torch"), nb::arg("source"),
           "Runs on C-contiguous CPU arrays; returns torch tensors when torch is true, else NumPy arrays")
      .def("run_device",
           [](CompiledModel& model, const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
             tilefuse::Status ran = model.RunOnDevice(inputs, outputs, stream);
             if (!ran.ok()) ValueOrThrow(tilefuse::StatusOr<int>(ran));
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream"),
           "Queues one run on device pointers (graph order) on a CUDA stream of the model's GPU's primary context")
      .def_prop_ro("device_runs", &CompiledModel::device_runs)
      .def("output_may_overwrite_input", &CompiledModel::OutputMayOverwriteInput, nb::arg("output"), nb::arg("input"),
           "Whether run_device may be given input `input`'s own pointer for output `output` (graph positions): the "
           "output's value is then left in that input's memory, an update in place without a copy")
      .def_prop_ro(
          "device_run_counts",
          [](const CompiledModel& model) {
            const CompiledModel::DeviceRunCounts c = model.device_run_counts();
            nb::dict d;
            d["replays"] = c.replays;
            d["one_by_one"] = c.one_by_one;
            d["through_buffers"] = c.through_buffers;
            d["captures"] = c.captures;
            d["output_copies"] = c.output_copies;
            d["staged_copies"] = c.staged_copies;
            d["host_us"] = static_cast<double>(c.host_ns) * 1e-3;
            d["host_us_in_launches"] = static_cast<double>(c.host_ns_in_launches) * 1e-3;
            d["host_us_deciding"] = static_cast<double>(c.host_ns_deciding) * 1e-3;
            d["host_us_finding_graph"] = static_cast<double>(c.host_ns_finding_graph) * 1e-3;
            return d;
          },
          "How runs on device pointers went so far: replays of a captured graph, kernels launched one by one, runs "
          "copied through the model's own buffers (a pointer not 256-byte aligned), captures, outputs copied after, small values whose pointers change copied in and out (one launch each way); the host time "
          "spent in those runs, and of it in the driver's launch calls (microseconds, summed)")
      .def("explain_json", [](const CompiledModel& model, const std::string& device) {
        return ValueOrThrow(model.Explain(tilefuse::ExplainFormat::kJson, device));
      })
      .def_prop_ro("device", &CompiledModel::device)
      .def_prop_ro("backend", &CompiledModel::backend)
      .def_prop_ro("backend_note", &CompiledModel::backend_note)
      .def_prop_ro("warnings",
                   [](const CompiledModel& model) {
                     nb::list list;
                     for (const std::string& warning : model.warnings()) list.append(warning);
                     return list;
                   })
      .def_prop_ro("compile_ms", &CompiledModel::compile_ms)
      .def_prop_ro("arena_bytes", &CompiledModel::arena_bytes)
      .def_prop_ro("output_bytes",
                   [](const CompiledModel& model) {
                     int64_t bytes = 0;
                     for (const tilefuse::ValueSpec& v : model.outputs()) bytes += tilefuse::NumElements(v.shape) * tilefuse::DTypeSize(v.dtype);
                     return bytes;
                   })
      .def_prop_ro("compile_stages_ms",
                   [](const CompiledModel& model) {
                     nb::list list;
                     for (const auto& [stage, ms] : model.compile_stages_ms()) list.append(nb::make_tuple(stage, ms));
                     return list;
                   })
      .def_prop_ro("kernels", [](const CompiledModel& model) { return DescribeKernels(model.kernels()); })
      .def_prop_ro("inputs", [](const CompiledModel& model) { return DescribeValues(model.inputs()); })
      .def_prop_ro("outputs", [](const CompiledModel& model) { return DescribeValues(model.outputs()); });

  m.def("compile", &CompileModel, nb::arg("path"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"), nb::arg("device"),
        nb::arg("strict") = false, nb::arg("precision") = "highest", nb::arg("dims") = Dims{}, nb::arg("background_compile") = true);
  m.def("compile_bytes", &CompileModelBytes, nb::arg("model"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"),
        nb::arg("device"), nb::arg("strict") = false, nb::arg("precision") = "highest", nb::arg("dims") = Dims{},
        nb::arg("background_compile") = true);
  m.def(
      "symbolic_dims", [](const std::string& path) { return DescribeInputDims(ValueOrThrow(tilefuse::SymbolicDimsOf(path))); },
      nb::arg("path"), "The model's symbolic input dims: (input, position, dim, name) each");
  nb::class_<ModelFile>(m, "ModelFile", "A model file read once, compiled once per binding of its symbolic dims (compile_file)")
      .def_prop_ro("path", &ModelFile::path)
      .def_prop_ro("symbolic_dims", [](const ModelFile& file) { return DescribeInputDims(file.symbolic_dims()); });
  m.def(
      "open_model",
      [](const std::string& path) {
        tilefuse::StatusOr<std::shared_ptr<ModelFile>> file = tilefuse::InvalidArgument("not read");
        {
          nb::gil_scoped_release release;  // a large model takes seconds to read and parse
          file = ModelFile::Open(path);
        }
        return ValueOrThrow(std::move(file));
      },
      nb::arg("path"));
  m.def("compile_file", &CompileModelFile, nb::arg("file"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"), nb::arg("device"),
        nb::arg("strict") = false, nb::arg("precision") = "highest", nb::arg("dims") = Dims{}, nb::arg("background_compile") = true);
  m.def(
      "attention_backward",
      [](const std::string& dtype, int heads, int group, int nq, int nk, int d, bool causal, double scale,
         const std::vector<uint64_t>& pointers, int device, uint64_t stream) {
        tilefuse::AttentionBackwardCall call = AttentionCall(dtype, heads, group, nq, nk, d, causal);
        call.scale = scale;
        if (pointers.size() != 10) ValueOrThrow(tilefuse::StatusOr<int>(tilefuse::InvalidArgument("attention_backward: 10 pointers")));
        call.q = pointers[0], call.k = pointers[1], call.v = pointers[2], call.out = pointers[3], call.dout = pointers[4];
        call.lse = pointers[5], call.dq = pointers[6], call.dk = pointers[7], call.dv = pointers[8], call.scratch = pointers[9];
        tilefuse::Status ran = tilefuse::RunAttentionBackward(device, call, stream);
        if (!ran.ok()) ValueOrThrow(tilefuse::StatusOr<int>(ran));
      },
      nb::arg("dtype"), nb::arg("heads"), nb::arg("group"), nb::arg("nq"), nb::arg("nk"), nb::arg("d"), nb::arg("causal"),
      nb::arg("scale"), nb::arg("pointers"), nb::arg("device"), nb::arg("stream"),
      "The attention backward template on device pointers (q, k, v, out, dout, lse, dq, dk, dv, scratch), queued on a "
      "stream of the GPU's primary context");
  m.def(
      "attention_backward_scratch_bytes",
      [](const std::string& dtype, int heads, int group, int nq, int nk, int d, bool causal) {
        return ValueOrThrow(tilefuse::AttentionBackwardScratchBytes(AttentionCall(dtype, heads, group, nq, nk, d, causal)));
      },
      nb::arg("dtype"), nb::arg("heads"), nb::arg("group"), nb::arg("nq"), nb::arg("nk"), nb::arg("d"), nb::arg("causal"),
      "The scratch bytes attention_backward needs, or tilefuse.Error naming why the template does not take the problem");
  m.def("build_graph_for_cuda_arch", &BuildGraphForCudaArch, nb::arg("graph"), nb::arg("arch") = "sm_90a",
        nb::arg("fuse") = true, nb::arg("dump_dir") = "", nb::arg("stand_ins") = false,
        "`tilefuse compile --backend cuda` of a built graph: its kernels through NVRTC for arch, no GPU needed "
        "(stand_ins: the slow-compiling template forms as their quick stand-ins, what a cold compile on a GPU runs "
        "while they compile in the background)");
  m.def("compile_graph", &CompileGraph, nb::arg("graph"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"),
        nb::arg("device"), nb::arg("strict") = false, nb::arg("dump_dir") = "", nb::arg("precision") = "highest",
        nb::arg("background_compile") = true, nb::arg("gemm") = "auto", nb::arg("plans") = nb::none(),
        "Compiles a graph built with GraphBuilder (dump_dir: every stage's output there, as the CLI's --dump-dir; "
        "gemm: how the GPU runs products, as the CLI's --gemm: auto, template or library; plans: a BindingPlans "
        "shared by the graph's compiles at other sizes, whose plans a compile of the same structure reuses)");
  nb::class_<tilefuse::BindingPlans>(m, "BindingPlans", "The plans of a graph's compiles at other sizes (compile_graph's plans)")
      .def(nb::init<>());
}
