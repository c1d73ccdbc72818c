#include "frontend/onnx/tensor_proto.h"

#include <fmt/format.h>

#include <cstring>

#include "support/check.h"
#include "support/contained_file.h"

namespace tilefuse::onnx_import {

namespace {

using onnx::TensorProto;

struct DTypeRow {
  DType dtype;
  int32_t onnx;
};
constexpr DTypeRow kDTypeRows[] = {
    {DType::kF32, TensorProto::FLOAT},   {DType::kF64, TensorProto::DOUBLE}, {DType::kF16, TensorProto::FLOAT16},
    {DType::kBF16, TensorProto::BFLOAT16}, {DType::kI64, TensorProto::INT64}, {DType::kI32, TensorProto::INT32},
    {DType::kI8, TensorProto::INT8},     {DType::kU8, TensorProto::UINT8},   {DType::kBool, TensorProto::BOOL},
    // FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ (ONNX 1.14+; the system headers may predate them)
    {DType::kF8E4M3, 17}, {DType::kF8E4M3Fnuz, 18}, {DType::kF8E5M2, 19}, {DType::kF8E5M2Fnuz, 20},
};

std::string TensorLabel(const TensorProto& proto) {
  return proto.name().empty() ? std::string("tensor") : fmt::format("tensor '{}'", proto.name());
}

// The number of values in the typed repeated field that holds `dtype`.
int64_t TypedFieldSize(const TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::kF32: return proto.float_data_size();
    case DType::kF64: return proto.double_data_size();
    case DType::kI64: return proto.int64_data_size();
    default: return proto.int32_data_size();  // i32, i8, u8, bool, and the 16-bit patterns of f16/bf16
  }
}

// Copies `values` (a repeated proto field, already checked to fill the tensor) into the
// tensor, converting each element to the tensor's storage type `Stored`.
template <typename Stored, typename Field>
void CopyTypedField(const Field& values, Tensor& tensor) {
  std::byte* out = tensor.data();
  for (int i = 0; i < values.size(); ++i) {
    Stored v = static_cast<Stored>(values.Get(i));
    std::memcpy(out + i * sizeof(Stored), &v, sizeof(Stored));
  }
}

StatusOr<Tensor> TensorFromTypedData(const TensorProto& proto, DType dtype, const Shape& shape) {
  if (TypedFieldSize(proto, dtype) != NumElements(shape))
    return InvalidArgument(fmt::format("{} holds {} values but its shape {} needs {}", TensorLabel(proto),
                                       TypedFieldSize(proto, dtype), ShapeToString(shape), NumElements(shape)));
  Tensor tensor(dtype, shape);
  switch (dtype) {
    case DType::kF32: CopyTypedField<float>(proto.float_data(), tensor); break;
    case DType::kF64: CopyTypedField<double>(proto.double_data(), tensor); break;
    case DType::kI64: CopyTypedField<int64_t>(proto.int64_data(), tensor); break;
    case DType::kI32: CopyTypedField<int32_t>(proto.int32_data(), tensor); break;
    case DType::kI8: CopyTypedField<int8_t>(proto.int32_data(), tensor); break;
    case DType::kU8:  // 8-bit floats travel as their bit patterns in int32_data too
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz:
      CopyTypedField<uint8_t>(proto.int32_data(), tensor); break;
    case DType::kF16:  // half types travel as their 16-bit patterns in int32_data
    case DType::kBF16: CopyTypedField<uint16_t>(proto.int32_data(), tensor); break;
    case DType::kBool:
      CopyTypedField<uint8_t>(proto.int32_data(), tensor);
      for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.SetDouble(i, tensor.GetDouble(i));
      break;
  }
  return tensor;
}

StatusOr<Tensor> TensorFromBytes(const std::string& bytes, DType dtype, const Shape& shape, const std::string& origin,
                                 const TensorProto& proto) {
  size_t needed = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  if (bytes.size() != needed)
    return InvalidArgument(fmt::format("{} has {} bytes of {} but its shape {} of {} needs {}", TensorLabel(proto),
                                       bytes.size(), origin, ShapeToString(shape), DTypeName(dtype), needed));
  Tensor tensor(dtype, shape);
  if (!bytes.empty()) std::memcpy(tensor.data(), bytes.data(), bytes.size());
  if (dtype == DType::kBool)  // any non-zero byte is true; store exactly 0/1
    for (int64_t i = 0; i < tensor.num_elements(); ++i) tensor.SetDouble(i, tensor.GetDouble(i));
  return tensor;
}

StatusOr<std::string> ReadExternalData(const TensorProto& proto, const std::string& base_dir) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      else if (entry.key() == "offset") offset = std::stoull(entry.value());
      else if (entry.key() == "length") length = std::stoull(entry.value());
    } catch (const std::exception&) {
      return InvalidArgument(fmt::format("{}: external data {} '{}' is not a number", TensorLabel(proto), entry.key(),
                                         entry.value()));
    }
  }
  if (location.empty()) return InvalidArgument(fmt::format("{} is external but names no location", TensorLabel(proto)));
  // The location comes from the model, which may have been downloaded: nothing outside
  // the model's folder may be read through it (support/contained_file.h).
  StatusOr<std::string> bytes = ReadContainedFileRange(base_dir, location, offset, length);
  if (!bytes.ok())
    return Status(bytes.status().code(), fmt::format("{}: external data location '{}': {}", TensorLabel(proto), location,
                                                     bytes.status().message()));
  return bytes;
}

}  // namespace

int32_t DTypeToOnnx(DType dtype) {
  for (const DTypeRow& row : kDTypeRows)
    if (row.dtype == dtype) return row.onnx;
  TF_UNREACHABLE("dtype without an ONNX type");
}

std::optional<DType> DTypeFromOnnx(int32_t onnx_type) {
  for (const DTypeRow& row : kDTypeRows)
    if (row.onnx == onnx_type) return row.dtype;
  return std::nullopt;
}

std::string OnnxTypeName(int32_t onnx_type) {
  // The float8 types (17-20) postdate the onnx 1.12 enum, so they are named here.
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",   "UINT8",     "INT8",         "UINT16",
                                       "INT16",     "INT32",   "INT64",     "STRING",       "BOOL",
                                       "FLOAT16",   "DOUBLE",  "UINT32",    "UINT64",       "COMPLEX64",
                                       "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                       "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  if (onnx_type >= 0 && onnx_type < static_cast<int32_t>(std::size(kNames))) return kNames[onnx_type];
  return fmt::format("type {}", onnx_type);
}

StatusOr<DType> RequireDType(int32_t onnx_type, const std::string& what) {
  std::optional<DType> dtype = DTypeFromOnnx(onnx_type);
  if (!dtype)
    return Unimplemented(fmt::format("{} has element type {}, which tilefuse does not support", what,
                                     OnnxTypeName(onnx_type)));
  return *dtype;
}

Status CheckShapeSize(const Shape& shape, int64_t max_elements, const std::string& what) {
  // The non-zero dims are bounded even when a dim is 0: [2^40, 2^40, 0] holds nothing, but
  // counting its elements left to right overflows, and so does padding a dim of 2^63 - 1.
  int64_t product = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(fmt::format("{} has a negative dimension in {}", what, ShapeToString(shape)));
    if (d == 0) continue;
    if (d > max_elements / product)
      return InvalidArgument(fmt::format("{} of shape {} is too large: its non-zero dims multiply to more than {}", what,
                                         ShapeToString(shape), max_elements));
    product *= d;
  }
  return Status::Ok();
}

StatusOr<Tensor> TensorFromProto(const TensorProto& proto, const std::string& base_dir) {
  ASSIGN_OR_RETURN(DType dtype, RequireDType(proto.data_type(), TensorLabel(proto)));
  if (proto.dims_size() > 8) return Unimplemented(fmt::format("{} has rank {} (above 8)", TensorLabel(proto), proto.dims_size()));
  Shape shape(proto.dims().begin(), proto.dims().end());
  RETURN_IF_ERROR(CheckShapeSize(shape, kMaxTensorElements, TensorLabel(proto)));
  if (proto.has_segment()) return Unimplemented(fmt::format("{} is segmented", TensorLabel(proto)));
  if (proto.data_location() == TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(std::string bytes, ReadExternalData(proto, base_dir));
    return TensorFromBytes(bytes, dtype, shape, "external data", proto);
  }
  if (proto.has_raw_data()) return TensorFromBytes(proto.raw_data(), dtype, shape, "raw data", proto);
  return TensorFromTypedData(proto, dtype, shape);
}

TensorProto TensorToProto(const Tensor& tensor, const std::string& name) {
  TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(DTypeToOnnx(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  if (tensor.num_bytes() > 0)
    proto.set_raw_data(std::string(reinterpret_cast<const char*>(tensor.data()), tensor.num_bytes()));
  else
    proto.set_raw_data("");
  return proto;
}

std::vector<int64_t> TensorToInt64s(const Tensor& tensor) {
  std::vector<int64_t> values(tensor.num_elements());
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    if (tensor.dtype() == DType::kI64) std::memcpy(&values[i], tensor.data() + i * 8, 8);
    else values[i] = static_cast<int64_t>(tensor.GetDouble(i));
  }
  return values;
}

}  // namespace tilefuse::onnx_import
