// Binding integer inputs at import time. ONNX backend tests feed shapes, axes, pads and
// split sizes as graph inputs, but tilefuse needs them as constants to know every shape
// statically. When a model does not import as it is and a data set provides its
// inputs, `tilefuse run` binds the integer ones as constants
// (ImportOptions::bound_inputs, by the names in the input_i.pb files) and tries again;
// then, while the importer names one more floating-point input it needs at import time
// (Resize's scales and roi), that one too.
#pragma once

#include <string>
#include <vector>

#include "frontend/onnx/importer.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::cli {

// The inputs of one data set as read from DIR/input_0.pb, input_1.pb, ...
struct NamedInputs {
  std::vector<std::string> names;  // TensorProto names; "" when a file has none
  std::vector<Tensor> values;
};

// Reads the TensorProto names of DIR/input_0.pb .. input_{count-1}.pb.
StatusOr<std::vector<std::string>> ReadInputNames(const std::string& dir, size_t count);

// The integer-typed named inputs, to bind as constants.
ImportOptions BindIntegerInputs(const NamedInputs& inputs);

// The value an importer error names as needed at import time ("input 2 (scales,
// 'NAME') must be known at import time ..."), or "" when the error is another one.
std::string ValueNeededAtImport(const Status& status);

// Binds the floating-point input called `name` of `inputs`; false when there is none.
// (Not bools: a training_mode flag bound true would turn on Dropout's random mask, which
// cannot reproduce the test's expected values.)
bool BindNamedFloatInput(const NamedInputs& inputs, const std::string& name, ImportOptions& options);

// Whether `inputs` has exactly the bound values of `options` under the same names (data
// sets after the first must agree with the first, whose values were bound).
bool AgreesWithBinding(const NamedInputs& inputs, const ImportOptions& options);

// `inputs` without the bound ones, in their order.
std::vector<Tensor> UnboundInputs(const NamedInputs& inputs, const ImportOptions& options);

}  // namespace tilefuse::cli
