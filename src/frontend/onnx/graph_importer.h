// Turns a parsed onnx::ModelProto into a verified tilefuse Graph.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "frontend/onnx/importer.h"

namespace tilefuse::onnx_import {

inline constexpr int64_t kMinOpset = 1;   // best effort below 13
inline constexpr int64_t kMaxOpset = 23;  // 22 and 23: see opset_versions.h

// External data files are found relative to `base_dir` (the model's folder).
StatusOr<ImportedModel> ImportModelProto(const onnx::ModelProto& model, const std::string& base_dir,
                                        const ImportOptions& options = {});

}  // namespace tilefuse::onnx_import
