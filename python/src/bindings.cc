#include "bindings.h"

#include <cstring>
#include <string>

#include <fmt/format.h>
#include <nanobind/stl/string.h>  // the Error(message, code) call below casts std::strings

namespace tilefuse::python {

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

Tensor ToTensor(const InputArray& array, size_t index) {
  DType dtype = ValueOrThrow(DTypeOf(array, index));
  Shape shape(array.shape_ptr(), array.shape_ptr() + array.ndim());
  Tensor tensor = Tensor::Uninitialized(dtype, std::move(shape));
  if (tensor.num_bytes() > 0) std::memcpy(tensor.data(), array.data(), tensor.num_bytes());
  return tensor;
}

std::vector<Tensor> ToTensors(const std::vector<InputArray>& arrays) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < arrays.size(); ++i) tensors.push_back(ToTensor(arrays[i], i));
  return tensors;
}

std::vector<Tensor> BorrowTensors(const std::vector<InputArray>& arrays) {
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const InputArray& array = arrays[i];
    DType dtype = ValueOrThrow(DTypeOf(array, i));
    tensors.push_back(Tensor::Borrowed(dtype, Shape(array.shape_ptr(), array.shape_ptr() + array.ndim()), const_cast<void*>(array.data())));
  }
  return tensors;
}

Tensor OwnedCopy(const Tensor& t) {
  Tensor copy = Tensor::Uninitialized(t.dtype(), t.shape());
  if (copy.num_bytes() > 0) std::memcpy(copy.data(), t.data(), copy.num_bytes());
  return copy;
}

namespace {

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
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz:
      return make(Code::UInt, 8);  // their bit patterns
  }
  return make(Code::Float, 32);
}

}  // namespace

// A NumPy array or torch tensor over the tensor's own bytes, keeping them alive.
nb::object ToArray(Tensor tensor, bool torch) {
  auto* owner = new Tensor(std::move(tensor));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(owner->shape().begin(), owner->shape().end());
  const nb::dlpack::dtype dtype = DlpackType(owner->dtype(), torch);
  if (torch) return nb::cast(nb::ndarray<nb::pytorch>(owner->data(), shape.size(), shape.data(), capsule, nullptr, dtype));
  return nb::cast(nb::ndarray<nb::numpy>(owner->data(), shape.size(), shape.data(), capsule, nullptr, dtype));
}

}  // namespace tilefuse::python
