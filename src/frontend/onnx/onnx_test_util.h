// Test-only helpers for the ONNX importer's tests: import a small text graph, run it on
// the reference interpreter, write models and tensors to a private temporary folder.
#pragma once

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "reference/interpreter.h"
#include "frontend/onnx/importer.h"

namespace tilefuse::onnx_testing {

// "<ir_version: 8, opset_import: ["" : N]> graph" — the header every test graph needs.
inline std::string WithOpset(int opset, const std::string& graph) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\n" + graph;
}

// Imports `text`, expecting success.
inline Graph Import(const std::string& text) {
  StatusOr<ImportedModel> model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(model->graph) : Graph();
}

// Imports `text`, expecting failure; returns the message.
inline std::string ImportError(const std::string& text) {
  StatusOr<ImportedModel> model = ImportOnnxText(text);
  EXPECT_FALSE(model.ok()) << "import unexpectedly succeeded";
  return model.ok() ? std::string() : model.status().ToString();
}

// Runs the graph on the reference interpreter; returns output `index` as doubles.
inline std::vector<double> RunGraph(const Graph& graph, const std::vector<Tensor>& inputs, int index = 0) {
  StatusOr<std::vector<Tensor>> outputs = RunReference(graph, inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
  if (!outputs.ok() || index >= static_cast<int>(outputs->size())) return {};
  return (*outputs)[index].ToDoubles();
}

inline Tensor F32(Shape shape, std::vector<double> values) { return Tensor::FromDoubles(DType::kF32, shape, values); }
inline Tensor I64(Shape shape, std::vector<double> values) { return Tensor::FromDoubles(DType::kI64, shape, values); }

// `count` values in ±[0.25, 2), none of them zero, from a fixed seed.
inline std::vector<double> RandomNonZero(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> magnitude(0.25, 2.0);
  std::vector<double> values(count);
  for (double& v : values) v = (rng() % 2 ? 1 : -1) * magnitude(rng);
  return values;
}

inline void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected, double tolerance = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i]))) << "at element " << i;
}

inline int CountOps(const Graph& graph, OpCode op) {
  return static_cast<int>(std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                        [op](const Node& n) { return n.op == op; }));
}

inline const Node& OutputNode(const Graph& graph, int index = 0) {
  return graph.node(graph.outputs().at(index).node);
}

inline bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tilefuse_onnx_test_XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Parses ONNX text into a ModelProto (for tests that edit or serialize the proto).
inline onnx::ModelProto ParseModel(const std::string& text) {
  onnx::ModelProto model;
  onnx::OnnxParser parser(text.c_str());
  auto status = parser.Parse(model);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return model;
}

inline void WriteModel(const onnx::ModelProto& model, const std::string& path) {
  std::string bytes;
  ASSERT_TRUE(model.SerializeToString(&bytes));
  WriteBytes(path, bytes);
}

inline void WriteTensor(const onnx::TensorProto& tensor, const std::string& path) {
  std::string bytes;
  ASSERT_TRUE(tensor.SerializeToString(&bytes));
  WriteBytes(path, bytes);
}

}  // namespace tilefuse::onnx_testing
