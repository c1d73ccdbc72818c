// Pieces shared by the `tilefuse` subcommands: exit codes, error printing, loading a
// model, making and checking inputs, and staging --dump-dir output.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/importer.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::cli {

// The CLI's contract with scripts (and with tests/conformance/run_node_tests.py).
enum ExitCode : int {
  kExitOk = 0,         // ran; with --check, every output matched
  kExitMismatch = 1,   // --check found an output outside tolerance
  kExitBadInput = 2,   // bad model, bad inputs, unsupported op, or bad usage
};

// Prints "error: <code>: <message>" on stderr, e.g. "error: unsupported: node 'n0' ...".
void PrintError(const Status& status);

// Imports MODEL (.onnx, .onnxtxt or a backend-test folder), with a clear error when the
// path does not exist.
StatusOr<ImportedModel> LoadModel(const std::string& path);

// One deterministic random tensor per graph input (Tensor::Random), the i-th drawn
// with a seed derived from (seed, i) so that inputs differ from each other.
// Refused (ResourceExhausted, naming the input) when the host cannot hold them.
StatusOr<std::vector<Tensor>> MakeRandomInputs(const Graph& graph, uint64_t seed);

// Checks that `inputs` fit the graph's parameters in count, dtype and shape; the error
// names the input and where it came from (`source`, e.g. a folder).
Status ValidateInputs(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& source);

// "f32[2,3]"
std::string DescribeTensorType(DType dtype, const Shape& shape);

// Milliseconds since `start`.
double MillisecondsSince(std::chrono::steady_clock::time_point start);

// --dump-dir without half-written files: the passes write into a sibling staging
// folder, and Publish() moves each finished file into the final folder. When the run
// fails before Publish(), the staging folder is removed and the final folder is never
// created, so a failing model leaves nothing behind.
class DumpDirStaging {
 public:
  explicit DumpDirStaging(std::string final_dir);  // empty: no dumps
  ~DumpDirStaging();
  DumpDirStaging(const DumpDirStaging&) = delete;
  DumpDirStaging& operator=(const DumpDirStaging&) = delete;

  // Creates the staging folder; returns the folder the passes should write into ("" when
  // no dumps were asked for).
  StatusOr<std::string> Prepare();
  // Moves every staged file into the final folder (created if needed).
  Status Publish();

 private:
  std::string final_dir_;
  std::string staging_dir_;
};

}  // namespace tilefuse::cli
