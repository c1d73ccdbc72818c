// ONNX import: binary .onnx (with external data), ONNX textual syntax (.onnxtxt), and
// the ONNX backend-test folder layout. Produces a verified Graph in which every node
// carries its ONNX node name. Errors name the ONNX node, op type and opset.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct OnnxModelInfo {
  int64_t opset = 0;          // default-domain opset the model imports
  std::string producer;       // producer_name + version, when present
  int num_onnx_nodes = 0;
};

struct ImportedModel {
  Graph graph;
  OnnxModelInfo info;
};

struct ImportOptions {
  // Values for graph inputs (by ONNX name) that become constants of the imported graph
  // and are no longer among its inputs. Backend tests feed shapes, axes and pads as
  // inputs; binding them lets such models import with static shapes. A bound value
  // must have the input's declared dtype and static dims.
  std::map<std::string, Tensor> bound_inputs;
  // Values of symbolic dims (ONNX dim_param) by name: a model input declared [batch, seq, 768]
  // imports as [8, 512, 768] with {batch: 8, seq: 512} (`--shape batch=8,seq=512`).
  std::map<std::string, int64_t> dims;
  // The shapes of the inputs a run will be given, in the order of the graph's inputs (those
  // that are not initializers): symbolic dims not in `dims` take their values from them, each
  // symbol the same everywhere it appears. Empty: none given.
  std::vector<Shape> input_shapes;
  // Initializers decoded by an earlier import of the same model (OnnxModelFile), by name: an
  // initializer found here is taken as it is (its bytes shared, not copied); one that is not is
  // decoded from its proto and added. Null: every initializer decoded, nothing kept.
  std::map<std::string, Tensor>* initializer_cache = nullptr;
};

// A symbolic dim of a model input: dim `dim` of input `input` is named `name` (ONNX
// dim_param; empty where it has neither a value nor a name).
struct SymbolicDim {
  std::string input;
  int position = 0;  // among the graph's inputs that are not initializers
  int dim = 0;
  std::string name;
};

// The symbolic dims of MODEL's inputs, in order (empty: every input shape is static).
StatusOr<std::vector<SymbolicDim>> SymbolicInputDims(const std::string& path);

// A model file read and parsed once, to import many times: once per binding of its symbolic
// dims (a decode loop's growing past). The first import decodes the initializers; every later
// one shares their bytes instead of reading, parsing and copying the file again (GPT-2 small's
// 650 MB took ~2 s an import). Thread-safe; the file is not read again, so a later change to it
// is not seen.
class OnnxModelFile {
 public:
  // MODEL as ImportOnnx takes it (.onnx, .onnxtxt, or a backend-test folder).
  static StatusOr<std::unique_ptr<OnnxModelFile>> Read(const std::string& path);
  ~OnnxModelFile();

  StatusOr<ImportedModel> Import(const ImportOptions& options = {});  // options.initializer_cache is its own
  const std::vector<SymbolicDim>& symbolic_dims() const { return symbolic_dims_; }

 private:
  struct Parsed;
  OnnxModelFile(std::unique_ptr<Parsed> parsed, std::vector<SymbolicDim> symbolic_dims);

  std::mutex mutex_;  // over parsed_ and initializers_
  std::unique_ptr<Parsed> parsed_;
  std::vector<SymbolicDim> symbolic_dims_;
  std::map<std::string, Tensor> initializers_;
};


// MODEL may be a .onnx file, a .onnxtxt file, or a backend-test folder (model.onnx).
StatusOr<ImportedModel> ImportOnnx(const std::string& path, const ImportOptions& options = {});
// The textual syntax, from memory (tests build small graphs this way).
StatusOr<ImportedModel> ImportOnnxText(const std::string& text, const ImportOptions& options = {});

// The ONNX op types (default domain) the importer maps, sorted. A model that uses only
// these may still be refused for a particular attribute, dtype or non-constant shape.
std::vector<std::string> SupportedOnnxOps();

// One backend-test data set: DIR/test_data_set_N/input_i.pb and output_i.pb.
struct TestDataSet {
  std::string dir;
  std::vector<Tensor> inputs;
  std::vector<Tensor> expected_outputs;
};
// Reads every test_data_set_* folder of a backend-test folder, in order.
StatusOr<std::vector<TestDataSet>> LoadTestDataSets(const std::string& model_dir);
// Reads input_0.pb, input_1.pb, ... from a folder (the `--inputs DIR` of the CLI).
StatusOr<std::vector<Tensor>> LoadTensorsFromDir(const std::string& dir, const std::string& prefix);
// One serialized TensorProto file.
StatusOr<Tensor> LoadTensorProtoFile(const std::string& path);
// Writes a TensorProto file (atomically: temp file + rename).
Status SaveTensorProtoFile(const Tensor& tensor, const std::string& name, const std::string& path);

}  // namespace tilefuse
