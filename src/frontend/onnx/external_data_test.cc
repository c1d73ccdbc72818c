// External data of an untrusted model (docs/security.md): nothing outside the model's
// folder is read, and every refusal names the initializer or node and the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/onnx_test_util.h"
#include "testing/open_watch.h"

namespace tilefuse::onnx_testing {
namespace {

namespace fs = std::filesystem;

const char* kAddModel = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[4] x) => (float[4] y) { y = Add(x, w) })";

void MakeExternal(onnx::TensorProto& tensor, const std::string& name, const std::string& location) {
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto::FLOAT);
  tensor.add_dims(4);
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = tensor.add_external_data();
  entry->set_key("location");
  entry->set_value(location);
}

// A model folder m/ whose initializer 'w' lives at `location`, and a folder beside it
// holding a 16-byte file the model must not reach (the right size for float[4]).
class ExternalDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.File("m"));
    WriteBytes(dir_.File("outside/secret.bin"), "0123456789abcdef");
  }
  std::string Model(const std::string& location) {
    onnx::ModelProto model = ParseModel(kAddModel);
    MakeExternal(*model.mutable_graph()->add_initializer(), "w", location);
    WriteModel(model, dir_.File("m/model.onnx"));
    return dir_.File("m/model.onnx");
  }
  TempDir dir_;
};

TEST_F(ExternalDataTest, APlainFileInsideIsRead) {
  float values[4] = {1, 2, 3, 4};
  WriteBytes(dir_.File("m/w.bin"), std::string(reinterpret_cast<const char*>(values), sizeof values));
  StatusOr<ImportedModel> imported = ImportOnnx(Model("w.bin"));
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ExpectNear(RunGraph(imported->graph, {F32({4}, {1, 1, 1, 1})}), {2, 3, 4, 5});
}

TEST_F(ExternalDataTest, ALinkOutIsRefusedAndTheFileOutsideIsNeverOpened) {
  fs::create_symlink(dir_.File("outside/secret.bin"), dir_.File("m/w.bin"));
  OpenWatch watch(dir_.File("outside"));
  ASSERT_TRUE(watch.works());
  StatusOr<ImportedModel> imported = ImportOnnx(Model("w.bin"));
  ASSERT_FALSE(imported.ok()) << "imported a model whose weights are a file outside its folder";
  const std::string& message = imported.status().message();
  EXPECT_TRUE(Contains(message, "initializer 'w'")) << message;
  EXPECT_TRUE(Contains(message, "tensor 'w'")) << message;
  EXPECT_TRUE(Contains(message, "outside the model's folder")) << message;
  EXPECT_FALSE(watch.SawAnything()) << "the file outside the model's folder was opened";
  std::ifstream(dir_.File("outside/secret.bin")).get();
  EXPECT_TRUE(watch.SawAnything()) << "the watch sees an open when there is one";
}

TEST_F(ExternalDataTest, ALinkedFolderComponentIsRefused) {
  fs::create_directory_symlink(dir_.File("outside"), dir_.File("m/shards"));
  OpenWatch watch(dir_.File("outside"));
  StatusOr<ImportedModel> imported = ImportOnnx(Model("shards/secret.bin"));
  ASSERT_FALSE(imported.ok());
  EXPECT_TRUE(Contains(imported.status().message(), "initializer 'w'")) << imported.status().ToString();
  EXPECT_FALSE(watch.SawAnything()) << "the folder outside was opened";
  // Pointing inside changes nothing: the link itself is refused.
  WriteBytes(dir_.File("m/real/w.bin"), "0123456789abcdef");
  fs::create_directory_symlink("real", dir_.File("m/alias"));
  StatusOr<ImportedModel> inside = ImportOnnx(Model("alias/w.bin"));
  ASSERT_FALSE(inside.ok());
  EXPECT_TRUE(Contains(inside.status().message(), "alias' is a symbolic link")) << inside.status().ToString();
}

TEST_F(ExternalDataTest, AHardLinkIsRefused) {
  fs::create_hard_link(dir_.File("outside/secret.bin"), dir_.File("m/w.bin"));
  StatusOr<ImportedModel> imported = ImportOnnx(Model("w.bin"));
  ASSERT_FALSE(imported.ok());
  EXPECT_TRUE(Contains(imported.status().message(), "hard links")) << imported.status().ToString();
  EXPECT_TRUE(Contains(imported.status().message(), "initializer 'w'")) << imported.status().ToString();
}

TEST_F(ExternalDataTest, AConstantNodeIsNamedToo) {
  fs::create_symlink(dir_.File("outside/secret.bin"), dir_.File("m/c.bin"));
  onnx::ModelProto model = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) { y = Add(x, c) })");
  onnx::NodeProto* node = model.mutable_graph()->add_node();
  node->set_name("make_c");
  node->set_op_type("Constant");
  node->add_output("c");
  onnx::AttributeProto* value = node->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  MakeExternal(*value->mutable_t(), "c_value", "c.bin");
  // Constant must come before its user.
  model.mutable_graph()->mutable_node()->SwapElements(0, 1);
  WriteModel(model, dir_.File("m/model.onnx"));
  StatusOr<ImportedModel> imported = ImportOnnx(dir_.File("m/model.onnx"));
  ASSERT_FALSE(imported.ok());
  EXPECT_TRUE(Contains(imported.status().message(), "node 'make_c'")) << imported.status().ToString();
  EXPECT_TRUE(Contains(imported.status().message(), "tensor 'c_value'")) << imported.status().ToString();
}

}  // namespace
}  // namespace tilefuse::onnx_testing
