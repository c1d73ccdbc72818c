// Fuzzes the binary ONNX importer: the input is a model.onnx file, written into a scratch
// folder that also holds files its external data may name (fuzz_fixture.h).
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/onnx/importer.h"
#include "fuzz_check.h"
#include "fuzz_fixture.h"
#include "proto_mutator.h"

namespace fuzzing = tilefuse::fuzzing;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = fuzzing::ScratchFolder() + "/model.onnx";
  fuzzing::WriteFile(path, std::string_view(reinterpret_cast<const char*>(data), size));
  fuzzing::CheckRefusal(tilefuse::ImportOnnx(path));
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto model;
  return fuzzing::MutateProtoBytes(model, data, size, max_size, seed);
}
