// Conversions between onnx::TensorProto and tilefuse's Tensor, including tensors whose
// bytes live in an external data file next to the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::onnx_import {

// The ONNX element type (TensorProto::DataType value) of our dtype, and back; nullopt
// for ONNX types tilefuse does not represent (string, uint16/32/64, int16, complex,
// float8).
int32_t DTypeToOnnx(DType dtype);
std::optional<DType> DTypeFromOnnx(int32_t onnx_type);
// "FLOAT16", "STRING", "FLOAT8E4M3FN", ... for messages.
std::string OnnxTypeName(int32_t onnx_type);
// DTypeFromOnnx, or Unimplemented naming `what` (e.g. "tensor 'w'").
StatusOr<DType> RequireDType(int32_t onnx_type, const std::string& what);

// Every value of an imported graph has at most this many elements, and a tensor with
// data (initializer, Constant, test data) at most kMaxTensorElements: far beyond any
// machine, but small enough that element and byte counts never overflow int64.
inline constexpr int64_t kMaxValueElements = int64_t{1} << 40;
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 34;
// InvalidArgument naming `what` when a dim is negative or the product of the non-zero
// dims (computed without overflow) exceeds `max_elements`: then no order of multiplying
// the dims, nor adding pads to one, overflows.
Status CheckShapeSize(const Shape& shape, int64_t max_elements, const std::string& what);

// Decodes a tensor from raw_data, the typed repeated fields or external data.
// External locations are relative to `base_dir` (the model's folder). The bytes are
// checked against the declared shape before the tensor is allocated.
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir);
// Encodes a tensor as raw_data.
onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name);

// Integer values of a small index-like tensor (shapes, axes, starts): read exactly
// from the integer bytes, never through f64, so INT64_MAX ("to the end") survives.
std::vector<int64_t> TensorToInt64s(const Tensor& tensor);

}  // namespace tilefuse::onnx_import
