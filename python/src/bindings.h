// What the extension's bindings share: Status errors raised as tilefuse.Error, and arrays
// (NumPy or torch CPU, through DLPack or the buffer protocol) to and from Tensors.
#pragma once

#include <exception>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::python {

namespace nb = nanobind;

using InputArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// Thrown by the bindings; TranslateStatusError raises it as tilefuse.Error.
struct StatusError {
  Status status;
};

template <typename T>
T ValueOrThrow(StatusOr<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

void TranslateStatusError(const std::exception_ptr& error, void*);

// `index` names the array in the error when its element type is not one of tilefuse's.
StatusOr<DType> DTypeOf(const InputArray& array, size_t index);
Tensor ToTensor(const InputArray& array, size_t index);
std::vector<Tensor> ToTensors(const std::vector<InputArray>& arrays);
// Tensors over the arrays' own bytes (Tensor::Borrowed): valid while the arrays are.
std::vector<Tensor> BorrowTensors(const std::vector<InputArray>& arrays);
Tensor OwnedCopy(const Tensor& t);
// A NumPy array (torch = false) or torch tensor over the tensor's bytes, owning them.
nb::object ToArray(Tensor tensor, bool torch);

// tilefuse._tilefuse.GraphBuilder (graph_builder.cc).
void BindGraphBuilder(nb::module_& m);
// tilefuse._tilefuse.identity_key (identity_key.cc).
void BindIdentityKey(nb::module_& m);

}  // namespace tilefuse::python
