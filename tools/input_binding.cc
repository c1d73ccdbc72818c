#include "input_binding.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

namespace tilefuse::cli {

StatusOr<std::vector<std::string>> ReadInputNames(const std::string& dir, size_t count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    std::string path = fmt::format("{}/input_{}.pb", dir, i);
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    onnx::TensorProto proto;
    if (!in || !proto.ParseFromString(bytes.str())) {
      return InvalidArgument(fmt::format("'{}' is not a readable TensorProto", path));
    }
    names.push_back(proto.name());
  }
  return names;
}

ImportOptions BindIntegerInputs(const NamedInputs& inputs) {
  ImportOptions options;
  for (size_t i = 0; i < inputs.values.size() && i < inputs.names.size(); ++i) {
    DType dtype = inputs.values[i].dtype();
    if (inputs.names[i].empty() || (dtype != DType::kI64 && dtype != DType::kI32)) continue;
    options.bound_inputs[inputs.names[i]] = inputs.values[i];
  }
  return options;
}

std::string ValueNeededAtImport(const Status& status) {
  static const std::string kNeeded = "') must be known at import time";
  const std::string& message = status.message();
  size_t end = message.find(kNeeded);
  if (status.code() != StatusCode::kUnimplemented || end == std::string::npos) return "";
  size_t start = message.rfind(", '", end);
  return start == std::string::npos ? "" : message.substr(start + 3, end - start - 3);
}

bool BindNamedFloatInput(const NamedInputs& inputs, const std::string& name, ImportOptions& options) {
  for (size_t i = 0; i < inputs.values.size() && i < inputs.names.size(); ++i)
    if (!name.empty() && inputs.names[i] == name && IsFloat(inputs.values[i].dtype())) {
      options.bound_inputs[name] = inputs.values[i];
      return true;
    }
  return false;
}

namespace {

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.num_bytes() == b.num_bytes() &&
         (a.num_bytes() == 0 || std::memcmp(a.data(), b.data(), a.num_bytes()) == 0);
}

}  // namespace

bool AgreesWithBinding(const NamedInputs& inputs, const ImportOptions& options) {
  size_t matched = 0;
  for (size_t i = 0; i < inputs.values.size() && i < inputs.names.size(); ++i) {
    auto bound = options.bound_inputs.find(inputs.names[i]);
    if (bound == options.bound_inputs.end()) continue;
    if (!SameTensor(bound->second, inputs.values[i])) return false;
    ++matched;
  }
  return matched == options.bound_inputs.size();
}

std::vector<Tensor> UnboundInputs(const NamedInputs& inputs, const ImportOptions& options) {
  std::vector<Tensor> unbound;
  for (size_t i = 0; i < inputs.values.size(); ++i) {
    bool is_bound = i < inputs.names.size() && options.bound_inputs.count(inputs.names[i]) > 0;
    if (!is_bound) unbound.push_back(inputs.values[i]);
  }
  return unbound;
}

}  // namespace tilefuse::cli
