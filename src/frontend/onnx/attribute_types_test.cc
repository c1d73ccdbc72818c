#include "frontend/onnx/attribute_types.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

namespace tilefuse::onnx_import {
namespace {

using onnx::AttributeProto;

onnx::NodeProto Node(const std::string& op) {
  onnx::NodeProto node;
  node.set_op_type(op);
  return node;
}

AttributeProto* Add(onnx::NodeProto& node, const std::string& name, AttributeProto::AttributeType type) {
  AttributeProto* attr = node.add_attribute();
  attr->set_name(name);
  attr->set_type(type);
  return attr;
}

TEST(AttributeTypes, MatchingTypesPass) {
  onnx::NodeProto node = Node("Conv");
  Add(node, "group", AttributeProto::INT)->set_i(2);
  Add(node, "pads", AttributeProto::INTS)->add_ints(1);
  Add(node, "auto_pad", AttributeProto::STRING)->set_s("NOTSET");
  EXPECT_TRUE(CheckAttributeTypes(node, 17).ok());
}

TEST(AttributeTypes, WrongTypeIsNamed) {
  onnx::NodeProto node = Node("Conv");
  Add(node, "group", AttributeProto::FLOAT)->set_f(2);
  Status s = CheckAttributeTypes(node, 17);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attribute 'group' must be an int, got FLOAT"), std::string::npos) << s.message();
}

TEST(AttributeTypes, UndefinedTypeCountsByItsField) {
  onnx::NodeProto good = Node("Softmax");
  Add(good, "axis", AttributeProto::UNDEFINED)->set_i(1);
  EXPECT_TRUE(CheckAttributeTypes(good, 13).ok());
  onnx::NodeProto bad = Node("Softmax");
  Add(bad, "axis", AttributeProto::UNDEFINED)->set_f(1);
  EXPECT_FALSE(CheckAttributeTypes(bad, 13).ok());
}

TEST(AttributeTypes, ThePerOpsetSchemaDecides) {
  // Upsample (opset 9) takes its mode as a string.
  onnx::NodeProto node = Node("Upsample");
  Add(node, "mode", AttributeProto::INT)->set_i(0);
  EXPECT_FALSE(CheckAttributeTypes(node, 9).ok());
}

TEST(AttributeTypes, UnknownOpsAndAttributesAreLeftToTheHandler) {
  onnx::NodeProto node = Node("NotAnOnnxOp");
  Add(node, "axis", AttributeProto::GRAPH);
  EXPECT_TRUE(CheckAttributeTypes(node, 17).ok());
  onnx::NodeProto extra = Node("Relu");
  Add(extra, "not_in_the_schema", AttributeProto::GRAPH);
  EXPECT_TRUE(CheckAttributeTypes(extra, 17).ok());
}

}  // namespace
}  // namespace tilefuse::onnx_import
