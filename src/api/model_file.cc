// ModelFile (tilefuse/tilefuse.h): the facade over the importer's OnnxModelFile, so that a
// model compiled once per binding of its symbolic dims reads and decodes its weights once.
#include <filesystem>

#include <fmt/format.h>

#include "api/model_file_state.h"

namespace tilefuse {

ModelFile::ModelFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
ModelFile::~ModelFile() = default;

StatusOr<std::shared_ptr<ModelFile>> ModelFile::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound(fmt::format("model '{}' does not exist", path));
  auto state = std::make_unique<State>();
  state->path = path;
  ASSIGN_OR_RETURN(state->file, OnnxModelFile::Read(path));
  for (const SymbolicDim& d : state->file->symbolic_dims()) state->symbolic_dims.push_back({d.input, d.position, d.dim, d.name});
  return std::shared_ptr<ModelFile>(new ModelFile(std::move(state)));
}

const std::string& ModelFile::path() const { return state_->path; }
const std::vector<InputDim>& ModelFile::symbolic_dims() const { return state_->symbolic_dims; }

StatusOr<Graph> ModelFile::Import(const std::map<std::string, int64_t>& dims) {
  ImportOptions options;
  options.dims = dims;
  ASSIGN_OR_RETURN(ImportedModel imported, state_->file->Import(options));
  return std::move(imported.graph);
}

StatusOr<std::vector<InputDim>> SymbolicDimsOf(const std::string& model_path) {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelFile> file, ModelFile::Open(model_path));
  return file->symbolic_dims();
}

}  // namespace tilefuse
