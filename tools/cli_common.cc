#include "cli_common.h"

#include "support/host_memory.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <system_error>

#include <fmt/format.h>

namespace tilefuse::cli {

namespace fs = std::filesystem;

void PrintError(const Status& status) { std::cerr << "error: " << status.ToString() << "\n"; }

StatusOr<ImportedModel> LoadModel(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return NotFound(fmt::format("model '{}' does not exist", path));
  return ImportOnnx(path);
}

StatusOr<std::vector<Tensor>> MakeRandomInputs(const Graph& graph, uint64_t seed) {
  int64_t bytes = 0;
  for (int id : graph.inputs()) {
    const Node& p = graph.node(id);
    int64_t b = SaturatingBytes(NumElements(p.shape), DTypeSize(p.dtype));
    bytes = b > INT64_MAX - bytes ? INT64_MAX : bytes + b;
    RETURN_IF_ERROR(CheckHostMemory(bytes, fmt::format("random inputs up to input '{}' {}", p.name, DescribeTensorType(p.dtype, p.shape))));
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& parameter = graph.node(graph.inputs()[i]);
    // Distinct streams per input: without the index, two inputs of one shape would be equal.
    uint64_t input_seed = seed * 1000003u + i;
    inputs.push_back(Tensor::Random(parameter.dtype, parameter.shape, input_seed));
  }
  return inputs;
}

std::string DescribeTensorType(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

Status ValidateInputs(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& source) {
  const std::vector<int>& parameters = graph.inputs();
  if (inputs.size() != parameters.size()) {
    return InvalidArgument(fmt::format("the model has {} input(s) but {} provides {}", parameters.size(),
                                       source, inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& parameter = graph.node(parameters[i]);
    const Tensor& given = inputs[i];
    if (given.dtype() != parameter.dtype || given.shape() != parameter.shape) {
      return InvalidArgument(fmt::format("input {} '{}' expects {} but {} provides {}", i, parameter.name,
                                         DescribeTensorType(parameter.dtype, parameter.shape), source,
                                         DescribeTensorType(given.dtype(), given.shape())));
    }
  }
  return Status::Ok();
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

DumpDirStaging::DumpDirStaging(std::string final_dir) : final_dir_(std::move(final_dir)) {}

DumpDirStaging::~DumpDirStaging() {
  if (staging_dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_dir_, ec);  // best effort: nothing to report from a destructor
}

StatusOr<std::string> DumpDirStaging::Prepare() {
  if (final_dir_.empty()) return std::string();
  fs::path final_path = fs::path(final_dir_).lexically_normal();
  if (final_path.filename().empty()) final_path = final_path.parent_path();
  staging_dir_ = fmt::format("{}.partial-{}", final_path.string(), ::getpid());
  std::error_code ec;
  fs::remove_all(staging_dir_, ec);
  if (!fs::create_directories(staging_dir_, ec) || ec) {
    std::string reason = ec ? ec.message() : "it could not be created";
    staging_dir_.clear();
    return InvalidArgument(fmt::format("cannot create the dump folder next to '{}': {}", final_dir_, reason));
  }
  return staging_dir_;
}

Status DumpDirStaging::Publish() {
  if (staging_dir_.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(final_dir_, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create dump folder '{}': {}", final_dir_, ec.message()));
  for (const fs::directory_entry& entry : fs::directory_iterator(staging_dir_, ec)) {
    fs::rename(entry.path(), fs::path(final_dir_) / entry.path().filename(), ec);
    if (ec) return InvalidArgument(fmt::format("cannot move dump '{}' into '{}': {}", entry.path().string(),
                                               final_dir_, ec.message()));
  }
  if (ec) return InvalidArgument(fmt::format("cannot read dump folder '{}': {}", staging_dir_, ec.message()));
  return Status::Ok();
}

}  // namespace tilefuse::cli
