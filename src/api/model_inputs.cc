#include "api/model_inputs.h"
#include "tilefuse/tilefuse.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "support/host_memory.h"

namespace tilefuse {

StatusOr<ImportedModel> LoadModel(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound(fmt::format("model '{}' does not exist", path));
  return ImportOnnx(path, options);
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

}  // namespace tilefuse
