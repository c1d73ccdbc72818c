#include "frontend/onnx/node_context.h"

#include <fmt/format.h>

#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

using onnx::AttributeProto;

NodeContext::NodeContext(const onnx::NodeProto& node, int64_t opset, int node_index, std::string base_dir,
                         std::vector<Value> inputs, GraphBuilder& builder, const ConstantTracker& constants)
    : node_(node),
      opset_(opset),
      node_index_(node_index),
      base_dir_(std::move(base_dir)),
      inputs_(std::move(inputs)),
      outputs_(node.output_size()),
      builder_(builder),
      constants_(constants) {}

std::vector<Value> NodeContext::Inputs() const {
  std::vector<Value> present;
  for (Value v : inputs_)
    if (v.valid()) present.push_back(v);
  return present;
}

const Tensor* NodeContext::KnownInput(int i) const { return HasInput(i) ? constants_.Find(builder_, inputs_[i]) : nullptr; }

StatusOr<Tensor> NodeContext::ConstInput(int i, std::string_view what) const {
  if (!HasInput(i)) return InvalidArgument(fmt::format("input {} ({}) is missing", i, what));
  const Tensor* value = KnownInput(i);
  if (!value)
    return Unimplemented(fmt::format("input {} ({}, '{}') must be known at import time, but it is computed from graph "
                                     "inputs",
                                     i, what, node_.input(i)));
  return *value;
}

StatusOr<std::vector<int64_t>> NodeContext::ConstInts(int i, std::string_view what) const {
  ASSIGN_OR_RETURN(Tensor value, ConstInput(i, what));
  if (!IsInteger(value.dtype()))
    return InvalidArgument(fmt::format("input {} ({}) must be an integer tensor, got {}", i, what, DTypeName(value.dtype())));
  if (value.rank() > 1)
    return InvalidArgument(fmt::format("input {} ({}) must be a scalar or 1-D, got shape {}", i, what,
                                       ShapeToString(value.shape())));
  return TensorToInt64s(value);
}

StatusOr<double> NodeContext::ConstScalar(int i, std::string_view what) const {
  ASSIGN_OR_RETURN(Tensor value, ConstInput(i, what));
  if (value.num_elements() != 1)
    return InvalidArgument(fmt::format("input {} ({}) must hold one value, got shape {}", i, what,
                                       ShapeToString(value.shape())));
  return value.GetDouble(0);
}

// ---- attributes

const AttributeProto* NodeContext::FindAttr(std::string_view name) const {
  for (const AttributeProto& attr : node_.attribute())
    if (attr.name() == name) return &attr;
  return nullptr;
}

bool NodeContext::CheckAttrType(const AttributeProto& attr, int expected_type, bool has_value, const char* expected) {
  // Old exporters leave `type` unset; then the populated field decides.
  if (attr.type() == expected_type || (attr.type() == AttributeProto::UNDEFINED && has_value)) return true;
  builder_.Fail(InvalidArgument(fmt::format("attribute '{}' must be {}, got {}", attr.name(), expected,
                                            AttributeProto::AttributeType_Name(attr.type()))));
  return false;
}

int64_t NodeContext::Int(std::string_view name, int64_t fallback) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr || !CheckAttrType(*attr, AttributeProto::INT, attr->has_i(), "an int")) return fallback;
  return attr->i();
}

double NodeContext::Float(std::string_view name, double fallback) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr || !CheckAttrType(*attr, AttributeProto::FLOAT, attr->has_f(), "a float")) return fallback;
  return attr->f();
}

std::string NodeContext::String(std::string_view name, std::string fallback) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr || !CheckAttrType(*attr, AttributeProto::STRING, attr->has_s(), "a string")) return fallback;
  return attr->s();
}

std::vector<int64_t> NodeContext::Ints(std::string_view name) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr || !CheckAttrType(*attr, AttributeProto::INTS, attr->ints_size() > 0, "a list of ints")) return {};
  return {attr->ints().begin(), attr->ints().end()};
}

std::vector<double> NodeContext::Floats(std::string_view name) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr || !CheckAttrType(*attr, AttributeProto::FLOATS, attr->floats_size() > 0, "a list of floats")) return {};
  return {attr->floats().begin(), attr->floats().end()};
}

StatusOr<Tensor> NodeContext::TensorAttr(std::string_view name) {
  const AttributeProto* attr = FindAttr(name);
  if (!attr) return InvalidArgument(fmt::format("attribute '{}' is missing", name));
  if (attr->type() != AttributeProto::TENSOR && !(attr->type() == AttributeProto::UNDEFINED && attr->has_t()))
    return InvalidArgument(fmt::format("attribute '{}' must be a tensor, got {}", name,
                                       AttributeProto::AttributeType_Name(attr->type())));
  StatusOr<Tensor> value = TensorFromProto(attr->t(), base_dir_);
  if (!value.ok()) return value.status().WithContext(fmt::format("attribute '{}'", name));
  return value;
}

StatusOr<std::optional<std::vector<int64_t>>> NodeContext::IntsAttrOrInput(std::string_view attr, int input) {
  if (HasInput(input)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> values, ConstInts(input, attr));
    return std::optional<std::vector<int64_t>>(std::move(values));
  }
  if (HasAttr(attr)) return std::optional<std::vector<int64_t>>(Ints(attr));
  return std::optional<std::vector<int64_t>>();
}

void NodeContext::SetOutput(int i, Value v) {
  if (i < num_outputs()) outputs_[i] = v;
}

}  // namespace tilefuse::onnx_import
