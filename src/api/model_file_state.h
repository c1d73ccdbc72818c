// ModelFile's insides (tilefuse/tilefuse.h), shared by model_file.cc and compiled_model.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/binding_plans.h"
#include "frontend/onnx/importer.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

struct ModelFile::State {
  std::string path;
  std::vector<InputDim> symbolic_dims;
  std::unique_ptr<OnnxModelFile> file;
  BindingPlans plans;  // of the bindings compiled from it (CompiledModel::FromModelFile)
};

}  // namespace tilefuse
