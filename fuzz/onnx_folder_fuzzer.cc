// Fuzzes the backend-test folder loader the way `tilefuse run DIR --check` drives it: the
// input is a packed folder (fuzz_fixture.h) of model.onnx and test_data_set_N/*.pb files.
// It loads the data sets, imports the model, and when the import is refused as
// unsupported, imports it again with the data sets' integer inputs bound as constants.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>

#include "frontend/onnx/importer.h"
#include "support/file_util.h"
#include "fuzz_check.h"
#include "fuzz_fixture.h"
#include "proto_mutator.h"

namespace tilefuse::fuzzing {
namespace {

// The integer inputs of the first data set, by the names their TensorProtos carry.
ImportOptions BindIntegerInputs(const std::string& folder, const std::vector<Tensor>& inputs) {
  ImportOptions options;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::kI64 && inputs[i].dtype() != DType::kI32) continue;
    StatusOr<std::string> contents = ReadWholeFile(folder + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    onnx::TensorProto proto;
    if (!contents.ok()) continue;
    if (proto.ParseFromString(*contents) && !proto.name().empty()) options.bound_inputs[proto.name()] = inputs[i];
  }
  return options;
}

void ImportFolder(std::string_view packed) {
  ClearScratchFolder();
  const std::string& folder = ScratchFolder();
  for (const PackedFile& file : UnpackFolder(packed)) WriteFile(folder + "/" + file.relative_path, file.bytes);
  StatusOr<std::vector<TestDataSet>> sets = LoadTestDataSets(folder);
  CheckRefusal(sets);
  StatusOr<ImportedModel> model = ImportOnnx(folder);
  CheckRefusal(model);
  if (model.ok() || model.status().code() != StatusCode::kUnimplemented || !sets.ok() || sets->empty()) return;
  ImportOptions binding = BindIntegerInputs(folder, sets->front().inputs);
  if (!binding.bound_inputs.empty()) CheckRefusal(ImportOnnx(folder, binding));
}

}  // namespace
}  // namespace tilefuse::fuzzing

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tilefuse::fuzzing::ImportFolder(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

// Structure-aware mutation of one piece: the model as a ModelProto, a data file as a
// TensorProto; the other pieces are kept as they are.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  namespace fuzzing = tilefuse::fuzzing;
  std::string_view packed(reinterpret_cast<const char*>(data), size);
  std::vector<size_t> starts = {0};
  for (size_t at = packed.find(fuzzing::kPieceSeparator); at != std::string_view::npos;
       at = packed.find(fuzzing::kPieceSeparator, at + 1))
    starts.push_back(at + fuzzing::kPieceSeparator.size() + 1);  // after the role byte
  size_t piece = seed % starts.size();
  size_t begin = std::min(starts[piece], size);
  size_t end = piece + 1 < starts.size() ? starts[piece + 1] - fuzzing::kPieceSeparator.size() - 1 : size;
  if (end < begin) return LLVMFuzzerMutate(data, size, max_size);
  std::string bytes(packed.substr(begin, end - begin));
  std::string tail(packed.substr(end));
  size_t room = max_size > size ? max_size - size + bytes.size() : bytes.size();
  bytes.resize(std::max(room, bytes.size()));
  onnx::ModelProto model;
  onnx::TensorProto tensor;
  google::protobuf::Message& scratch = piece == 0 ? static_cast<google::protobuf::Message&>(model) : tensor;
  size_t length = fuzzing::MutateProtoBytes(scratch, reinterpret_cast<uint8_t*>(bytes.data()), end - begin, room,
                                            seed / 7);
  if (begin + length + tail.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data + begin, bytes.data(), length);
  std::memcpy(data + begin + length, tail.data(), tail.size());
  return begin + length + tail.size();
}
