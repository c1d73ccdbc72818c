// The ONNX backend-test layout: DIR/model.onnx beside DIR/test_data_set_N/input_i.pb
// and output_i.pb, each one serialized TensorProto.
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <climits>
#include <filesystem>

#include "support/file_util.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse {

namespace fs = std::filesystem;

StatusOr<Tensor> LoadTensorProtoFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return InvalidArgument(fmt::format("'{}' is over 2 GiB", path));
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  onnx::TensorProto proto;
  if (!proto.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return InvalidArgument(fmt::format("'{}' is not a valid TensorProto: the protobuf is malformed or truncated", path));
  if (!proto.has_data_type())
    return InvalidArgument(fmt::format("'{}' is not a valid TensorProto: it has no data_type", path));
  StatusOr<Tensor> tensor = onnx_import::TensorFromProto(proto, fs::path(path).parent_path().string());
  if (!tensor.ok()) return tensor.status().WithContext(fmt::format("'{}'", path));
  return tensor;
}

Status SaveTensorProtoFile(const Tensor& tensor, const std::string& name, const std::string& path) {
  std::string bytes;
  if (!onnx_import::TensorToProto(tensor, name).SerializeToString(&bytes))
    return Internal(fmt::format("cannot serialize tensor '{}'", name));
  return WriteFileAtomically(path, bytes);
}

StatusOr<std::vector<Tensor>> LoadTensorsFromDir(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(fmt::format("folder '{}' does not exist", dir));
  // Accept both "input" and "input_" as the prefix of input_0.pb.
  std::string stem = !prefix.empty() && prefix.back() == '_' ? prefix : prefix + "_";
  std::vector<Tensor> tensors;
  for (int i = 0;; ++i) {
    fs::path file = fs::path(dir) / fmt::format("{}{}.pb", stem, i);
    if (!fs::exists(file, ec)) break;
    ASSIGN_OR_RETURN(Tensor tensor, LoadTensorProtoFile(file.string()));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

StatusOr<std::vector<TestDataSet>> LoadTestDataSets(const std::string& model_dir) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) return NotFound(fmt::format("folder '{}' does not exist", model_dir));
  const std::string kPrefix = "test_data_set_";
  std::vector<std::pair<long, fs::path>> folders;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind(kPrefix, 0) != 0) continue;
    std::string suffix = name.substr(kPrefix.size());
    if (suffix.empty() || !std::all_of(suffix.begin(), suffix.end(), ::isdigit) || suffix.size() > 9) continue;
    folders.emplace_back(std::stol(suffix), entry.path());
  }
  std::sort(folders.begin(), folders.end());
  std::vector<TestDataSet> sets;
  for (const auto& [index, folder] : folders) {
    TestDataSet set;
    set.dir = folder.string();
    ASSIGN_OR_RETURN(set.inputs, LoadTensorsFromDir(set.dir, "input_"));
    ASSIGN_OR_RETURN(set.expected_outputs, LoadTensorsFromDir(set.dir, "output_"));
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace tilefuse
