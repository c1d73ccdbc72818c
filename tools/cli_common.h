// Pieces shared by the `tilefuse` subcommands: exit codes, error printing and staging
// --dump-dir output. Loading a model and making or checking its inputs are the library's
// (api/model_inputs.h, included here for every subcommand).
#pragma once

#include <chrono>
#include <map>
#include <cstdint>
#include <string>
#include <vector>

#include "api/model_inputs.h"
#include "tilefuse/status.h"

namespace tilefuse::cli {

// The CLI's contract with scripts (and with tests/conformance/run_node_tests.py).
enum ExitCode : int {
  kExitOk = 0,         // ran; with --check, every output matched
  kExitMismatch = 1,   // --check found an output outside tolerance
  kExitBadInput = 2,   // bad model, bad inputs, unsupported op, or bad usage
};

// Prints "error: <code>: <message>" on stderr, e.g. "error: unsupported: node 'n0' ...".
void PrintError(const Status& status);

// Whether an executable `program` is in a folder of $PATH (Graphviz's dot, for --svg).
bool IsOnPath(const std::string& program);

// --shape NAME=N[,NAME=N...]: values of a model's symbolic dims (ImportOptions::dims), and
// ranges NAME=MIN..MAX or NAME=MIN..TYPICAL..MAX (TensorRT's min/opt/max): a compile without
// inputs takes a range's typical value (MAX when not given), and inputs whose dims fall outside
// it are refused.
struct ShapeFlag {
  struct Range {
    int64_t min = 0, typical = 0, max = 0;
  };
  std::map<std::string, int64_t> dims;
  std::map<std::string, Range> ranges;

  // `dims` with each range at its typical value.
  std::map<std::string, int64_t> AtTypical() const;
  // Whether the symbolic dims `graph` was imported with lie in their ranges (the error names the
  // dim, its value and its range).
  Status CheckRanges(const Graph& graph) const;
};
// The flag, or the error naming the malformed part.
StatusOr<ShapeFlag> ParseShapeFlag(const std::string& text);
// LoadModel with the symbolic dims `shape_flag` (--shape) gives, ranges at their typical values.
StatusOr<ImportedModel> LoadModelWithShapes(const std::string& path, const std::string& shape_flag);
inline constexpr char kShapeFlagHelp[] =
    "Values of the model's symbolic input dims (ONNX dim_param), NAME=N[,NAME=N...], e.g. batch=8,seq=512, or ranges "
    "NAME=MIN..MAX or NAME=MIN..TYPICAL..MAX, e.g. seq=1..512..2048: a range compiles at its typical value (MAX when not "
    "given) unless inputs give the dim, and refuses inputs outside it. Dims not named here take their values from the inputs "
    "given (--inputs or the test data sets). On cuda the kernels take the sizes these give at launch, so another binding "
    "compiles only the kernels whose code its sizes change (the kernel cache keeps the rest)";

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
