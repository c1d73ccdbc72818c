// tilefuse._tilefuse: the nanobind glue between Python and the library's public facade
// (tilefuse/tilefuse.h, the CLI's too; nothing else of the library). Arrays come in
// through DLPack or the buffer protocol (NumPy arrays, torch CPU tensors) and are copied
// into Tensors; outputs go back without a copy, each array owning its Tensor. Every
// Status error is raised as tilefuse.Error with the text the CLI prints after "error: ".
// The Python layer (python/tilefuse/) hands in C-contiguous CPU arrays only.
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "tilefuse/tilefuse.h"

namespace nb = nanobind;

namespace tilefuse::python {
namespace {

using InputArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

struct StatusError {
  Status status;
};

template <typename T>
T ValueOrThrow(StatusOr<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

void TranslateStatusError(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const StatusError& e) {
    nb::object type = nb::module_::import_("tilefuse._errors").attr("Error");
    nb::object value = type(e.status.ToString(), StatusCodeName(e.status.code()));
    PyErr_SetObject(type.ptr(), value.ptr());
  }
}

// uint16 arrives only as the bits of bfloat16: NumPy has no bfloat16 of its own, and the
// Python layer views ml_dtypes' bfloat16 as uint16 and refuses genuine uint16 arrays.
StatusOr<DType> DTypeOf(const InputArray& array, size_t index) {
  const nb::dlpack::dtype t = array.dtype();
  using Code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == static_cast<uint8_t>(Code::Float) && t.bits == 64) return DType::kF64;
    if (t.code == static_cast<uint8_t>(Code::Float) && t.bits == 32) return DType::kF32;
    if (t.code == static_cast<uint8_t>(Code::Float) && t.bits == 16) return DType::kF16;
    if (t.code == static_cast<uint8_t>(Code::Bfloat) && t.bits == 16) return DType::kBF16;
    if (t.code == static_cast<uint8_t>(Code::UInt) && t.bits == 16) return DType::kBF16;
    if (t.code == static_cast<uint8_t>(Code::Int) && t.bits == 64) return DType::kI64;
    if (t.code == static_cast<uint8_t>(Code::Int) && t.bits == 32) return DType::kI32;
    if (t.code == static_cast<uint8_t>(Code::Int) && t.bits == 8) return DType::kI8;
    if (t.code == static_cast<uint8_t>(Code::UInt) && t.bits == 8) return DType::kU8;
    if (t.code == static_cast<uint8_t>(Code::Bool) && t.bits == 8) return DType::kBool;
  }
  return InvalidArgument(fmt::format("input {} has an element type tilefuse does not take (DLPack code {}, {} bits; "
                                     "it takes f64, f32, f16, bf16, i64, i32, i8, u8 and bool)",
                                     index, t.code, t.bits));
}

std::vector<Tensor> ToTensors(const std::vector<InputArray>& arrays) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < arrays.size(); ++i) {
    DType dtype = ValueOrThrow(DTypeOf(arrays[i], i));
    Shape shape(arrays[i].shape_ptr(), arrays[i].shape_ptr() + arrays[i].ndim());
    Tensor tensor = Tensor::Uninitialized(dtype, std::move(shape));
    if (tensor.num_bytes() > 0) std::memcpy(tensor.data(), arrays[i].data(), tensor.num_bytes());
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

nb::dlpack::dtype DlpackType(DType dtype, bool torch) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code code, int bits) { return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1}; };
  switch (dtype) {
    case DType::kF64: return make(Code::Float, 64);
    case DType::kF32: return make(Code::Float, 32);
    case DType::kF16: return make(Code::Float, 16);
    case DType::kBF16: return torch ? make(Code::Bfloat, 16) : make(Code::UInt, 16);  // NumPy: bits, see DTypeOf
    case DType::kI64: return make(Code::Int, 64);
    case DType::kI32: return make(Code::Int, 32);
    case DType::kI8: return make(Code::Int, 8);
    case DType::kU8: return make(Code::UInt, 8);
    case DType::kBool: return make(Code::Bool, 8);
  }
  return make(Code::Float, 32);
}

// A NumPy array or torch tensor over the tensor's own bytes, keeping them alive.
nb::object ToArray(Tensor tensor, bool torch) {
  auto* owner = new Tensor(std::move(tensor));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(owner->shape().begin(), owner->shape().end());
  const nb::dlpack::dtype dtype = DlpackType(owner->dtype(), torch);
  if (torch) return nb::cast(nb::ndarray<nb::pytorch>(owner->data(), shape.size(), shape.data(), capsule, nullptr, dtype));
  return nb::cast(nb::ndarray<nb::numpy>(owner->data(), shape.size(), shape.data(), capsule, nullptr, dtype));
}

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
    d["num_nodes"] = k.num_nodes;
    list.append(d);
  }
  return list;
}

ModelOptions MakeOptions(const std::string& backend, bool tune, bool fuse, int device, bool strict) {
  ModelOptions options;
  options.strict = strict;
  options.backend = backend;
  options.tune = tune;
  options.fuse = fuse;
  options.device = device;
  return options;
}

std::unique_ptr<CompiledModel> CompileModel(const std::string& path, const std::string& backend, bool tune, bool fuse, int device,
                                            bool strict) {
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;  // the host compiler or NVRTC may take seconds
    compiled = CompiledModel::FromFile(path, MakeOptions(backend, tune, fuse, device, strict));
  }
  return ValueOrThrow(std::move(compiled));
}

std::unique_ptr<CompiledModel> CompileModelBytes(const nb::bytes& model, const std::string& backend, bool tune, bool fuse,
                                                 int device, bool strict) {
  const std::string_view bytes(model.c_str(), model.size());
  StatusOr<std::unique_ptr<CompiledModel>> compiled = InvalidArgument("not compiled");
  {
    nb::gil_scoped_release release;
    compiled = CompiledModel::FromBytes(bytes, MakeOptions(backend, tune, fuse, device, strict));
  }
  return ValueOrThrow(std::move(compiled));
}

nb::list RunModel(CompiledModel& model, const std::vector<InputArray>& arrays, bool torch, const std::string& source) {
  std::vector<Tensor> inputs = ToTensors(arrays);
  StatusOr<std::vector<Tensor>> outputs = InvalidArgument("not run");
  {
    nb::gil_scoped_release release;
    outputs = model.Run(inputs, nullptr, source);
  }
  nb::list list;
  for (Tensor& t : ValueOrThrow(std::move(outputs))) list.append(ToArray(std::move(t), torch));
  return list;
}

}  // namespace
}  // namespace tilefuse::python

NB_MODULE(_tilefuse, m) {
  using namespace tilefuse::python;
  using tilefuse::CompiledModel;
  m.doc() = "tilefuse's C++ library; use the tilefuse package, not this module";
  nb::register_exception_translator(TranslateStatusError);

  nb::class_<CompiledModel>(m, "CompiledModel")
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
      .def_prop_ro("kernels", [](const CompiledModel& model) { return DescribeKernels(model.kernels()); })
      .def_prop_ro("inputs", [](const CompiledModel& model) { return DescribeValues(model.inputs()); })
      .def_prop_ro("outputs", [](const CompiledModel& model) { return DescribeValues(model.outputs()); });

  m.def("compile", &CompileModel, nb::arg("path"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"), nb::arg("device"),
        nb::arg("strict") = false);
  m.def("compile_bytes", &CompileModelBytes, nb::arg("model"), nb::arg("backend"), nb::arg("tune"), nb::arg("fuse"),
        nb::arg("device"), nb::arg("strict") = false);
}
