// Writes the seed corpora of the importer fuzz targets:
//   OUT/text/    .onnxtxt graphs: examples/ and the text graphs of the importer's unit tests
//   OUT/binary/  the same graphs serialized, tests/models/*/model.onnx, and (--node-tests)
//                the model.onnx of every ONNX backend node test
//   OUT/folder/  packed backend-test folders (fuzz_fixture.h): tests/models/* and the node
//                tests with their data sets, and each graph above without data
//   (binary and folder) a model whose weights are each external-data file of the fixture,
//                the links it plants included
//   OUT/onnx_text.dict  a libFuzzer dictionary: the supported op types and the syntax
// plus the regression inputs in fuzz/regressions/{text,binary,folder}/. Files are named
// by a hash of their bytes, so equal seeds are written once.
#include <fmt/format.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/onnx/importer.h"
#include "fuzz_fixture.h"
#include "support/file_util.h"

namespace tilefuse::fuzzing {
namespace {

namespace fs = std::filesystem;

struct Corpus {
  fs::path root;
  int written = 0;
  void Add(const std::string& kind, const std::string& bytes) {
    fs::path path = root / kind / fmt::format("{:016x}", std::hash<std::string>{}(bytes));
    if (fs::exists(path)) return;
    WriteFile(path.string(), bytes);
    ++written;
  }
};

std::string ReadOrEmpty(const fs::path& path) {
  StatusOr<std::string> bytes = ReadWholeFile(path.string());
  return bytes.ok() ? *bytes : std::string();
}

std::vector<fs::path> SortedEntries(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  return entries;
}

// The raw string literals of a test file that hold a graph ("=>" and a body).
std::vector<std::string> TextGraphsIn(const std::string& source) {
  std::vector<std::string> graphs;
  for (size_t at = source.find("R\""); at != std::string::npos; at = source.find("R\"", at + 2)) {
    size_t open = source.find('(', at);
    if (open == std::string::npos || open - at > 18) continue;
    std::string close = ")" + source.substr(at + 2, open - at - 2) + "\"";
    size_t end = source.find(close, open);
    if (end == std::string::npos) break;
    std::string text = source.substr(open + 1, end - open - 1);
    if (text.find("=>") == std::string::npos || text.find('{') == std::string::npos) continue;
    size_t first = text.find_first_not_of(" \n\t");
    if (first != std::string::npos && text[first] != '<')
      text = "<ir_version: 8, opset_import: [\"\" : 17]>\n" + text;
    graphs.push_back(text);
  }
  return graphs;
}

void AddTextGraph(Corpus& corpus, const std::string& text) {
  corpus.Add("text", text);
  onnx::ModelProto model;
  try {
    onnx::OnnxParser parser(text.c_str());
    if (!parser.Parse(model).IsOK()) return;
  } catch (const std::exception&) {
    return;
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return;
  corpus.Add("binary", bytes);
  corpus.Add("folder", bytes);
}

// A backend-test folder: model.onnx and its data sets, packed.
void AddModelFolder(Corpus& corpus, const fs::path& dir) {
  std::string model = ReadOrEmpty(dir / "model.onnx");
  if (model.empty()) return;
  corpus.Add("binary", model);
  std::string packed = model;
  for (const fs::path& set : SortedEntries(dir)) {
    std::string name = set.filename().string();
    if (name != "test_data_set_0" && name != "test_data_set_1") continue;
    int base = name.back() == '1' ? 2 : 0;
    for (int kind = 0; kind < 2; ++kind)
      for (int i = 0;; ++i) {
        fs::path file = set / fmt::format("{}_{}.pb", kind == 0 ? "input" : "output", i);
        if (!fs::exists(file)) break;
        AppendPiece(packed, base + kind, ReadOrEmpty(file));
      }
  }
  corpus.Add("folder", packed);
}

// A model whose 16-byte initializer lives at each external-data file of the fixture
// (fuzz_fixture.h): the plain files, and the links the importer must refuse, so mutants
// start from every one of them.
void AddExternalDataSeeds(Corpus& corpus) {
  onnx::ModelProto model;
  onnx::OnnxParser parser(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x) => (float[4] y) { y = Add (x, w) })");
  if (!parser.Parse(model).IsOK()) return;
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (std::string_view location : kExternalDataFiles) {
    w->clear_external_data();
    for (auto [key, value] : {std::pair<const char*, std::string>{"location", std::string(location)},
                              {"offset", "0"}, {"length", "16"}}) {
      onnx::StringStringEntryProto* entry = w->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    }
    std::string bytes;
    if (!model.SerializeToString(&bytes)) continue;
    corpus.Add("binary", bytes);
    corpus.Add("folder", bytes);
  }
}

void WriteDictionary(const fs::path& path) {
  std::string dict;
  for (const std::string& op : SupportedOnnxOps()) dict += fmt::format("\"{}\"\n", op);
  for (const char* word : {"ir_version", "opset_import", "producer_name", "domain", "=>", "<", ">", "[", "]", "(",
                           ")", "{", "}", ",", "=", ":", "float", "double", "float16", "bfloat16", "int64", "int32",
                           "int8", "uint8", "bool", "string", "axis", "axes", "perm", "keepdims", "epsilon", "value",
                           "to", "shape", "pads", "strides", "kernel_shape", "dilations", "group", "mode", "alpha",
                           "beta", "transA", "transB", "split", "starts", "ends", "seq", "\"\" : 17", "ai.onnx",
                           "-1", "0", "1e30", "nan", "inf", "9223372036854775807", "-9223372036854775808"}) {
    std::string escaped;
    for (char c : std::string(word)) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
    dict += fmt::format("\"{}\"\n", escaped);
  }
  WriteFile(path.string(), dict);
}

int Main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--node-tests")) {
    std::fprintf(stderr, "usage: %s OUT_DIR [--node-tests ONNX_BACKEND_NODE_TEST_DIR]\n", argv[0]);
    return 2;
  }
  fs::path source = TILEFUSE_SOURCE_DIR;
  Corpus corpus{argv[1]};
  for (const fs::path& file : SortedEntries(source / "examples"))
    if (file.extension() == ".onnxtxt") AddTextGraph(corpus, ReadOrEmpty(file));
  for (const fs::path& file : SortedEntries(source / "src" / "frontend" / "onnx"))
    if (file.string().ends_with("_test.cc"))
      for (const std::string& text : TextGraphsIn(ReadOrEmpty(file))) AddTextGraph(corpus, text);
  for (const fs::path& dir : SortedEntries(source / "tests" / "models"))
    if (fs::is_directory(dir)) AddModelFolder(corpus, dir);
  AddExternalDataSeeds(corpus);
  if (argc == 4)
    for (const fs::path& dir : SortedEntries(argv[3]))
      if (fs::is_directory(dir)) AddModelFolder(corpus, dir);
  for (const char* kind : {"text", "binary", "folder"})
    for (const fs::path& file : SortedEntries(source / "fuzz" / "regressions" / kind))
      corpus.Add(kind, ReadOrEmpty(file));
  WriteDictionary(corpus.root / "onnx_text.dict");
  for (const char* kind : {"text", "binary", "folder"}) {
    int count = 0;
    std::error_code ec;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(corpus.root / kind, ec)) ++count;
    std::printf("%s: %d seeds\n", (corpus.root / kind).c_str(), count);
  }
  return 0;
}

}  // namespace
}  // namespace tilefuse::fuzzing

int main(int argc, char** argv) { return tilefuse::fuzzing::Main(argc, argv); }
