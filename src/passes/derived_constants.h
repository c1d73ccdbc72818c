// Constants a pass derives from another constant alone (a weight transposed to K-major, a weight
// padded to aligned columns), made once per source while the source lives. The graphs a model
// file imports per binding of its symbolic dims share their weights (api: ModelFile); without
// this, every binding's passes would derive the same weight again (GPT-2's 50257-word head,
// 77 MB in f16, transposed on the host each time) and the GPU would upload it again, where the
// shared result is uploaded once (backend/cuda/device_constants.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tilefuse/tensor.h"

namespace tilefuse {

// `make()`, the constant `how` derives from `source`, or the tensor an earlier call made from the
// same source bytes the same way, while both live (a graph holds the result: nothing else keeps
// it). `how` names the derivation and everything it depends on besides the source ("k-major",
// "pad columns to 50264"). For GraphBuilder::Constant(std::shared_ptr<const Tensor>).
std::shared_ptr<const Tensor> DerivedConstant(const Tensor& source, const std::string& how, const std::function<Tensor()>& make);

}  // namespace tilefuse
