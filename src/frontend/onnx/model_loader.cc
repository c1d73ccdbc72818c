// Reading models from disk and from ONNX text: the public entry points of importer.h
// that produce a graph.
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/parser.h>

#include <climits>
#include <filesystem>
#include <set>

#include "support/file_util.h"
#include "frontend/onnx/graph_importer.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {

namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Protobuf refuses messages above 64 MiB unless told otherwise; models with their
// weights inline are routinely larger.
StatusOr<onnx::ModelProto> ParseBinaryModel(const std::string& bytes, const std::string& path) {
  if (bytes.empty()) return InvalidArgument(fmt::format("'{}' is empty, not an ONNX model", path));
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return InvalidArgument(fmt::format("'{}' is over 2 GiB; store its weights as external data", path));
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
    return InvalidArgument(fmt::format("'{}' is not a valid ONNX model: the protobuf is malformed or truncated", path));
  // Random or truncated bytes can still parse as a message of unknown fields.
  if (!model.has_graph() || model.opset_import_size() == 0)
    return InvalidArgument(fmt::format("'{}' is not a valid ONNX model: it has no {}", path,
                                       model.has_graph() ? "opset_import" : "graph"));
  return model;
}

StatusOr<onnx::ModelProto> ParseTextModel(const std::string& text, const std::string& origin) {
  onnx::ModelProto model;
  try {
    onnx::OnnxParser parser(text.c_str());
    onnx::Common::Status status = parser.Parse(model);
    if (!status.IsOK())
      return InvalidArgument(fmt::format("{}: ONNX text syntax error: {}", origin, status.ErrorMessage()));
  } catch (const std::exception& e) {  // the onnx library may throw; keep it inside
    return InvalidArgument(fmt::format("{}: ONNX text syntax error: {}", origin, e.what()));
  }
  return model;
}

StatusOr<ImportedModel> ImportParsed(const StatusOr<onnx::ModelProto>& model, const std::string& base_dir,
                                     const std::string& origin, const ImportOptions& options) {
  if (!model.ok()) return model.status();
  StatusOr<ImportedModel> imported = onnx_import::ImportModelProto(*model, base_dir, options);
  if (!imported.ok() && !origin.empty()) return imported.status().WithContext(origin);
  return imported;
}

}  // namespace

StatusOr<ImportedModel> ImportOnnx(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "model.onnx").string();
    if (!fs::exists(file, ec))
      return NotFound(fmt::format("'{}' is a folder without a model.onnx (expected the backend-test layout)", path));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(file));
  std::string base_dir = fs::path(file).parent_path().string();
  if (EndsWith(file, ".onnxtxt") || EndsWith(file, ".txt"))
    return ImportParsed(ParseTextModel(bytes, fmt::format("'{}'", file)), base_dir, fmt::format("'{}'", file), options);
  return ImportParsed(ParseBinaryModel(bytes, file), base_dir, fmt::format("'{}'", file), options);
}

StatusOr<ImportedModel> ImportOnnxText(const std::string& text, const ImportOptions& options) {
  return ImportParsed(ParseTextModel(text, "ONNX text"), "", "", options);
}



StatusOr<std::vector<SymbolicDim>> SymbolicInputDims(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) file = (fs::path(path) / "model.onnx").string();
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(file));
  StatusOr<onnx::ModelProto> model = EndsWith(file, ".onnxtxt") || EndsWith(file, ".txt")
                                         ? ParseTextModel(bytes, fmt::format("'{}'", file))
                                         : ParseBinaryModel(bytes, file);
  if (!model.ok()) return model.status();
  std::set<std::string> initializers;
  for (const auto& init : model->graph().initializer()) initializers.insert(init.name());
  std::vector<SymbolicDim> dims;
  int position = 0;
  for (const auto& input : model->graph().input()) {
    if (initializers.count(input.name())) continue;
    const int here = position++;
    if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape()) continue;
    const auto& shape = input.type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d)
      if (!shape.dim(d).has_dim_value() || shape.dim(d).dim_value() < 0)
        dims.push_back({input.name(), here, d, shape.dim(d).has_dim_param() ? shape.dim(d).dim_param() : ""});
  }
  return dims;
}

}  // namespace tilefuse
