// Helpers for tests that drive the built `tilefuse` binary the way a user does: run a
// command line, capture exit code, stdout and stderr; make a scratch folder; write
// ONNX models and tensors into it.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

namespace tilefuse::testing_cli {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A folder under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tilefuse_test_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Runs `tilefuse ARGS` (ARGS already shell-quoted where needed); stderr goes to a file
// so that it can be checked apart from stdout.
inline CommandResult RunTilefuse(const std::string& args) {
  ScratchDir scratch;
  std::string err_path = scratch / "stderr.txt";
  std::string command = std::string(TILEFUSE_BINARY) + " " + args + " 2>" + Quote(err_path);
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.out.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(err_path);
  return result;
}

// Parses ONNX text with the onnx library (not with tilefuse) into a ModelProto.
inline onnx::ModelProto ParseOnnxText(const std::string& text) {
  onnx::ModelProto model;
  onnx::OnnxParser parser(text.c_str());
  auto status = parser.Parse(model);
  if (!status.IsOK()) throw std::runtime_error("test model does not parse: " + status.ErrorMessage());
  return model;
}

inline void WriteBinaryModel(const onnx::ModelProto& model, const std::string& path) {
  std::string bytes;
  model.SerializeToString(&bytes);
  WriteFile(path, bytes);
}

}  // namespace tilefuse::testing_cli
