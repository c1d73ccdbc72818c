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

StatusOr<ImportedModel> ImportParsed(const onnx::ModelProto& model, const std::string& base_dir, const std::string& origin,
                                     const ImportOptions& options) {
  StatusOr<ImportedModel> imported = onnx_import::ImportModelProto(model, base_dir, options);
  if (!imported.ok() && !origin.empty()) return imported.status().WithContext(origin);
  return imported;
}

std::vector<SymbolicDim> SymbolicDimsOfModel(const onnx::ModelProto& model) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<SymbolicDim> dims;
  int position = 0;
  for (const auto& input : model.graph().input()) {
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

}  // namespace

struct OnnxModelFile::Parsed {
  onnx::ModelProto model;
  std::string base_dir;        // where external data is found
  std::string origin;          // "'path'", the context of its errors
  bool initializers_dropped = false;  // their bytes live in initializers_ only
};

OnnxModelFile::OnnxModelFile(std::unique_ptr<Parsed> parsed, std::vector<SymbolicDim> symbolic_dims)
    : parsed_(std::move(parsed)), symbolic_dims_(std::move(symbolic_dims)) {}
OnnxModelFile::~OnnxModelFile() = default;

StatusOr<std::unique_ptr<OnnxModelFile>> OnnxModelFile::Read(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "model.onnx").string();
    if (!fs::exists(file, ec))
      return NotFound(fmt::format("'{}' is a folder without a model.onnx (expected the backend-test layout)", path));
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(file));
  auto parsed = std::make_unique<Parsed>();
  parsed->origin = fmt::format("'{}'", file);
  parsed->base_dir = fs::path(file).parent_path().string();
  StatusOr<onnx::ModelProto> model = EndsWith(file, ".onnxtxt") || EndsWith(file, ".txt") ? ParseTextModel(bytes, parsed->origin)
                                                                                        : ParseBinaryModel(bytes, file);
  if (!model.ok()) return model.status();
  bytes = std::string();  // the parsed model holds the weights now: do not keep them twice
  parsed->model = std::move(model).value();
  std::vector<SymbolicDim> dims = SymbolicDimsOfModel(parsed->model);
  return std::unique_ptr<OnnxModelFile>(new OnnxModelFile(std::move(parsed), std::move(dims)));
}

StatusOr<ImportedModel> OnnxModelFile::Import(const ImportOptions& options) {
  std::lock_guard<std::mutex> lock(mutex_);
  ImportOptions shared = options;
  shared.initializer_cache = &initializers_;
  StatusOr<ImportedModel> imported = ImportParsed(parsed_->model, parsed_->base_dir, parsed_->origin, shared);
  if (imported.ok() && !parsed_->initializers_dropped) {
    // Every initializer is decoded now (the importer takes them all before any node): keep
    // their names only, so the file's weights are held once.
    for (onnx::TensorProto& init : *parsed_->model.mutable_graph()->mutable_initializer()) {
      onnx::TensorProto name_only;
      name_only.set_name(init.name());
      init.Swap(&name_only);
    }
    parsed_->initializers_dropped = true;
  }
  return imported;
}

StatusOr<ImportedModel> ImportOnnx(const std::string& path, const ImportOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<OnnxModelFile> file, OnnxModelFile::Read(path));
  return file->Import(options);
}

StatusOr<ImportedModel> ImportOnnxText(const std::string& text, const ImportOptions& options) {
  StatusOr<onnx::ModelProto> model = ParseTextModel(text, "ONNX text");
  if (!model.ok()) return model.status();
  return ImportParsed(*model, "", "", options);
}

StatusOr<std::vector<SymbolicDim>> SymbolicInputDims(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<OnnxModelFile> file, OnnxModelFile::Read(path));
  return file->symbolic_dims();
}

}  // namespace tilefuse
