// Every way a model can be wrong gives a clear Status naming the file, or the node, op
// type and opset; nothing crashes.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

Status ImportFileStatus(const std::string& path) {
  StatusOr<ImportedModel> model = ImportOnnx(path);
  return model.ok() ? Status::Ok() : model.status();
}

TEST(OnnxImporterErrorsTest, SupportedOpsListTheIssuesCoverage) {
  std::vector<std::string> ops = SupportedOnnxOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char* op : {"Add", "Gelu", "LayerNormalization", "Dropout", "Conv", "BatchNormalization", "Trilu",
                         "GatherElements", "ReduceProd", "CastLike", "Range", "ConstantOfShape"})
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
  EXPECT_FALSE(std::binary_search(ops.begin(), ops.end(), "FooBar"));
}

TEST(OnnxImporterErrorsTest, MalformedProtobufNamesTheFile) {
  TempDir dir;
  WriteBytes(dir.File("bad.onnx"), std::string("\x0a\xff\xff\xff\xff\x0f garbage", 15));
  Status status = ImportFileStatus(dir.File("bad.onnx"));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "bad.onnx")) << status.ToString();
  EXPECT_TRUE(Contains(status.message(), "malformed")) << status.ToString();
}

TEST(OnnxImporterErrorsTest, TextThatIsNotAModelNamesTheFile) {
  TempDir dir;
  WriteBytes(dir.File("notes.onnx"), "just some words, not a protobuf at all");
  Status status = ImportFileStatus(dir.File("notes.onnx"));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "notes.onnx")) << status.ToString();
}

TEST(OnnxImporterErrorsTest, TruncatedModelNamesTheFile) {
  TempDir dir;
  onnx::ModelProto model = ParseModel(WithOpset(17, R"(
    g (float[64] x) => (float[64] y) {
      w = Constant <value = float[4] {1.0, 2.0, 3.0, 4.0}> ()
      y = Relu(x)
    })"));
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  for (size_t keep : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 3}) {
    WriteBytes(dir.File("cut.onnx"), bytes.substr(0, keep));
    Status status = ImportFileStatus(dir.File("cut.onnx"));
    EXPECT_FALSE(status.ok()) << "kept " << keep << " of " << bytes.size();
    EXPECT_TRUE(Contains(status.message(), "cut.onnx")) << status.ToString();
  }
}

TEST(OnnxImporterErrorsTest, EmptyAndMissingFiles) {
  TempDir dir;
  WriteBytes(dir.File("empty.onnx"), "");
  Status empty = ImportFileStatus(dir.File("empty.onnx"));
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(empty.message(), "empty.onnx")) << empty.ToString();
  Status missing = ImportFileStatus(dir.File("nothing.onnx"));
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.message(), "nothing.onnx")) << missing.ToString();
}

TEST(OnnxImporterErrorsTest, TextSyntaxErrorIsReported) {
  std::string error = ImportError("<ir_version: 8, opset_import: [\"\" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x ");
  EXPECT_TRUE(Contains(error, "syntax error")) << error;
}

TEST(OnnxImporterErrorsTest, UnknownOpNamesNodeOpAndOpset) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[2] x) => (float[2] y) { y = FooBar(x) })"));
  EXPECT_TRUE(Contains(error, "unsupported: node 'y' (FooBar, opset 17): unsupported op FooBar")) << error;
}

TEST(OnnxImporterErrorsTest, OpOfAnotherDomainIsUnsupported) {
  std::string error = ImportError(R"(
    <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[2] x) => (float[2] y) { y = com.microsoft.FastGelu(x) })");
  EXPECT_TRUE(Contains(error, "node 'y' (FastGelu, opset 17): unsupported op com.microsoft.FastGelu")) << error;
}

TEST(OnnxImporterErrorsTest, BadAttributeTypeNamesTheNode) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[2, 3] x) => (float[2, 3] y) { y = Softmax <axis = "last"> (x) })"));
  EXPECT_TRUE(Contains(error, "invalid argument: node 'y' (Softmax, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "attribute 'axis' must be an int")) << error;
}

TEST(OnnxImporterErrorsTest, BadAttributeValueNamesTheNode) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[2, 3] x) => (float[2, 3] y) { y = Softmax <axis = 5> (x) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Softmax, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "out of range")) << error;
}

TEST(OnnxImporterErrorsTest, WrongInputCountNamesTheNode) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[2] x) => (float[2] y) { y = Add(x) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Add, opset 17): Add takes 2 inputs, got 1")) << error;
}

TEST(OnnxImporterErrorsTest, NamedNodesUseTheirName) {
  onnx::ModelProto model = ParseModel(WithOpset(17, "g (float[2] x) => (float[2] y) { y = Add(x) }"));
  model.mutable_graph()->mutable_node(0)->set_name("add_7");
  TempDir dir;
  WriteModel(model, dir.File("m.onnx"));
  Status status = ImportFileStatus(dir.File("m.onnx"));
  EXPECT_TRUE(Contains(status.message(), "node 'add_7' (Add, opset 17)")) << status.ToString();
}

TEST(OnnxImporterErrorsTest, SymbolicInputDimNamesInputAndDim) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[batch, 3] x) => (float[batch, 3] y) { y = Relu(x) })"));
  EXPECT_TRUE(Contains(error, "input 'x' has symbolic dim 0 ('batch')")) << error;
}

// Symbolic dims take the values given by name, else the shapes of the inputs given (the first
// input to show a symbol binds it for the rest); a disagreement names both.
TEST(OnnxImporterErrorsTest, SymbolicDimsTakeGivenValuesOrTheInputsShapes) {
  const std::string text = WithOpset(17, R"(
    g (float[batch, seq] x, float[batch, 4] w) => (float[batch, seq] y) { y = Relu(x) })");
  ImportOptions by_name;
  by_name.dims = {{"batch", 3}, {"seq", 5}};
  StatusOr<ImportedModel> named = ImportOnnxText(text, by_name);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->graph.node(named->graph.inputs()[0]).shape, (Shape{3, 5}));
  EXPECT_EQ(named->graph.node(named->graph.inputs()[1]).shape, (Shape{3, 4}));

  ImportOptions by_inputs;
  by_inputs.input_shapes = {{2, 7}, {2, 4}};
  StatusOr<ImportedModel> shaped = ImportOnnxText(text, by_inputs);
  ASSERT_TRUE(shaped.ok()) << shaped.status().ToString();
  EXPECT_EQ(shaped->graph.node(shaped->graph.inputs()[0]).shape, (Shape{2, 7}));

  by_inputs.input_shapes = {{2, 7}, {6, 4}};
  StatusOr<ImportedModel> clash = ImportOnnxText(text, by_inputs);
  ASSERT_FALSE(clash.ok());
  EXPECT_TRUE(Contains(clash.status().message(), "input 'w' is given with dim 0 ('batch') = 6, but 'batch' is 2 (from input 'x''s shape)"))
      << clash.status().ToString();

  ImportOptions partly;
  partly.dims = {{"batch", 3}};
  StatusOr<ImportedModel> missing = ImportOnnxText(text, partly);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "input 'x' has symbolic dim 1 ('seq'): give its value (--shape seq=N"))
      << missing.status().ToString();
}

TEST(OnnxImporterErrorsTest, UnsupportedInputDTypeNamesTheInput) {
  std::string error = ImportError(WithOpset(17, R"(
    g (uint16[3] x) => (uint16[3] y) { y = Identity(x) })"));
  EXPECT_TRUE(Contains(error, "unsupported: input 'x' has element type UINT16")) << error;
}

TEST(OnnxImporterErrorsTest, OpsetNewerThanSupported) {
  std::string error = ImportError(WithOpset(24, "g (float[2] x) => (float[2] y) { y = Relu(x) }"));
  EXPECT_TRUE(Contains(error, "opset 24 is newer than tilefuse supports (13–23)")) << error;
}

TEST(OnnxImporterErrorsTest, UndefinedValue) {
  std::string error = ImportError(WithOpset(17, "g (float[2] x) => (float[2] y) { y = Add(x, z) }"));
  EXPECT_TRUE(Contains(error, "node 'y' (Add, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "'z' is not defined")) << error;
}

TEST(OnnxImporterErrorsTest, DeclaredOutputTypeMustMatch) {
  std::string wrong_type = ImportError(WithOpset(17, "g (float[2] x) => (int64[2] y) { y = Relu(x) }"));
  EXPECT_TRUE(Contains(wrong_type, "output 'y' is declared INT64 but the graph computes f32")) << wrong_type;
  std::string wrong_shape = ImportError(WithOpset(17, "g (float[2] x) => (float[3] y) { y = Relu(x) }"));
  EXPECT_TRUE(Contains(wrong_shape, "output 'y'")) << wrong_shape;
}

TEST(OnnxImporterErrorsTest, MissingExternalDataNamesTensorAndFile) {
  TempDir dir;
  onnx::ModelProto model = ParseModel(WithOpset(17, "g (float[2] x) => (float[2] y) { y = Add(x, w) }"));
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("gone.bin");
  WriteModel(model, dir.File("m.onnx"));
  Status status = ImportFileStatus(dir.File("m.onnx"));
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status.message(), "initializer 'w'")) << status.ToString();
  EXPECT_TRUE(Contains(status.message(), "gone.bin")) << status.ToString();
}

}  // namespace
}  // namespace tilefuse::onnx_testing
