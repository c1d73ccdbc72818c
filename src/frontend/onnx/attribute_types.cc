#include "frontend/onnx/attribute_types.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>

namespace tilefuse::onnx_import {

namespace {

using onnx::AttributeProto;

// Does an attribute of type UNDEFINED fill the field of `type`?
bool FillsFieldOf(const AttributeProto& attr, AttributeProto::AttributeType type) {
  switch (type) {
    case AttributeProto::INT: return attr.has_i();
    case AttributeProto::FLOAT: return attr.has_f();
    case AttributeProto::STRING: return attr.has_s();
    case AttributeProto::TENSOR: return attr.has_t();
    case AttributeProto::GRAPH: return attr.has_g();
    case AttributeProto::INTS: return attr.ints_size() > 0;
    case AttributeProto::FLOATS: return attr.floats_size() > 0;
    case AttributeProto::STRINGS: return attr.strings_size() > 0;
    default: return false;
  }
}

// As NodeContext's accessors say it: "an int", "a list of ints", ...
std::string Describe(AttributeProto::AttributeType type) {
  switch (type) {
    case AttributeProto::INT: return "an int";
    case AttributeProto::FLOAT: return "a float";
    case AttributeProto::STRING: return "a string";
    case AttributeProto::TENSOR: return "a tensor";
    case AttributeProto::GRAPH: return "a graph";
    case AttributeProto::INTS: return "a list of ints";
    case AttributeProto::FLOATS: return "a list of floats";
    case AttributeProto::STRINGS: return "a list of strings";
    default: return AttributeProto::AttributeType_Name(type);
  }
}

}  // namespace

Status CheckAttributeTypes(const onnx::NodeProto& node, int64_t opset) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(opset), onnx::ONNX_DOMAIN);
  if (!schema) return Status::Ok();
  for (const AttributeProto& attr : node.attribute()) {
    auto declared = schema->attributes().find(attr.name());
    if (declared == schema->attributes().end()) continue;
    AttributeProto::AttributeType type = declared->second.type;
    if (attr.type() == type || (attr.type() == AttributeProto::UNDEFINED && FillsFieldOf(attr, type))) continue;
    return InvalidArgument(fmt::format("attribute '{}' must be {}, got {} (the ONNX schema of {}-{})", attr.name(),
                                       Describe(type), AttributeProto::AttributeType_Name(attr.type()), node.op_type(),
                                       schema->since_version()));
  }
  return Status::Ok();
}

}  // namespace tilefuse::onnx_import
