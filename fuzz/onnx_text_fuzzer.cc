// Fuzzes the ONNX text parser and the importer behind it: the input is a .onnxtxt file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/onnx/importer.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  tilefuse::fuzzing::CheckRefusal(tilefuse::ImportOnnxText(text));
  return 0;
}
