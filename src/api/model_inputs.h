// A model's file and its inputs, as the facade (tilefuse/tilefuse.h) and the CLI take them:
// importing with a clear error for a missing path, random inputs, and checking given inputs
// against the graph's parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/importer.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// Imports MODEL (.onnx, .onnxtxt or a backend-test folder), with a clear error when the
// path does not exist; `options` gives symbolic dims their values (ImportOptions::dims).
StatusOr<ImportedModel> LoadModel(const std::string& path, const ImportOptions& options = {});

// One deterministic random tensor per graph input (Tensor::Random), the i-th drawn
// with a seed derived from (seed, i) so that inputs differ from each other.
// Refused (ResourceExhausted, naming the input) when the host cannot hold them.
StatusOr<std::vector<Tensor>> MakeRandomInputs(const Graph& graph, uint64_t seed);

// Checks that `inputs` fit the graph's parameters in count, dtype and shape; the error
// names the input and where it came from (`source`, e.g. a folder).
Status ValidateInputs(const Graph& graph, const std::vector<Tensor>& inputs, const std::string& source);

// "f32[2,3]"
std::string DescribeTensorType(DType dtype, const Shape& shape);

}  // namespace tilefuse
