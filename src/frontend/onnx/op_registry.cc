#include "frontend/onnx/op_registry.h"

#include "frontend/onnx/importer.h"
#include "support/check.h"

namespace tilefuse::onnx_import {

const OpRegistry& OpRegistry::Get() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    RegisterElementwiseOps(*r);
    RegisterActivationOps(*r);
    RegisterShapeOps(*r);
    RegisterPaddingOps(*r);
    RegisterIndexingOps(*r);
    RegisterGeneratorOps(*r);
    RegisterReductionOps(*r);
    RegisterMatMulOps(*r);
    RegisterNormalizationOps(*r);
    RegisterNnOps(*r);
    RegisterConvTransposeOps(*r);
    RegisterLossOps(*r);
    RegisterMathFunctionOps(*r);
    RegisterResizeOps(*r);
    RegisterScatterOps(*r);
    RegisterGatherNDOps(*r);
    RegisterEinsumOps(*r);
    RegisterTopKOps(*r);
    RegisterNonZeroOps(*r);
    RegisterQuantizeOps(*r);
    return r;
  }();
  return *registry;
}

const OpSpec* OpRegistry::Find(std::string_view op_type) const {
  auto it = specs_.find(op_type);
  return it == specs_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::OpTypes() const {
  std::vector<std::string> names;
  for (const auto& [name, spec] : specs_) names.push_back(name);
  return names;
}

void OpRegistry::Add(std::string op_type, OpHandler handler, int min_inputs, int max_inputs) {
  TF_CHECK_MSG(!specs_.count(op_type), op_type.c_str());
  specs_[std::move(op_type)] = OpSpec{handler, min_inputs, max_inputs};
}

}  // namespace tilefuse::onnx_import

namespace tilefuse {

std::vector<std::string> SupportedOnnxOps() { return onnx_import::OpRegistry::Get().OpTypes(); }

}  // namespace tilefuse
