#include "frontend/onnx/graph_importer.h"

#include <algorithm>
#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "frontend/onnx/constant_tracker.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/attribute_types.h"
#include "frontend/onnx/opset_versions.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

StatusOr<int64_t> DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& entry : model.opset_import()) {
    if (!IsDefaultDomain(entry.domain())) continue;
    int64_t opset = entry.version();
    if (opset > kMaxOpset)
      return Unimplemented(fmt::format("opset {} is newer than tilefuse supports (13–{})", opset, kMaxOpset));
    if (opset < kMinOpset)
      return Unimplemented(fmt::format("opset {} is older than tilefuse supports (13–{}, {}–12 best effort)", opset,
                                       kMaxOpset, kMinOpset));
    return opset;
  }
  if (model.opset_import_size() > 0)
    return Unimplemented(fmt::format("the model imports only domain '{}', not the default ONNX opset",
                                     model.opset_import(0).domain()));
  return InvalidArgument("the model does not import the default ONNX opset (domain \"\" or \"ai.onnx\")");
}

// Walks one ONNX graph in order: initializers, inputs, nodes, outputs.
class GraphImporter {
 public:
  GraphImporter(int64_t opset, std::string base_dir, const ImportOptions& options)
      : opset_(opset), base_dir_(std::move(base_dir)), options_(options) {}
  StatusOr<Graph> Import(const onnx::GraphProto& graph);

 private:
  Status ImportInitializers(const onnx::GraphProto& graph);
  Status ImportInput(const onnx::ValueInfoProto& input);
  StatusOr<int64_t> SymbolicDimValue(const std::string& label, const onnx::TensorShapeProto::Dimension& dim, int d, int position);
  Status BindInput(const onnx::ValueInfoProto& input, const Tensor& value);
  Status ImportNode(const onnx::NodeProto& node, int index);
  Status ImportOutput(const onnx::ValueInfoProto& output);
  Status Define(const std::string& name, Value v);
  StatusOr<Value> Lookup(const std::string& name) const;
  StatusOr<std::vector<Value>> NodeInputs(const onnx::NodeProto& node, const OpSpec& spec) const;

  int64_t opset_;
  std::string base_dir_;
  const ImportOptions& options_;
  int input_position_ = 0;                       // of the next input that is not an initializer
  std::map<std::string, std::string> bound_by_;  // symbolic dim -> the input whose shape gave its value
  std::map<std::string, int64_t> dim_values_;    // symbolic dims given or bound so far
  SymbolicInputs symbolic_;                      // which input dims are which symbols
  GraphBuilder builder_;
  ConstantTracker constants_;
  std::unordered_map<std::string, Value> values_;
  // Names of node outputs that the importer could not produce, with the reason; an
  // error only when something uses them.
  std::unordered_map<std::string, std::string> unavailable_;
};

StatusOr<Graph> GraphImporter::Import(const onnx::GraphProto& graph) {
  if (graph.sparse_initializer_size() > 0) return Unimplemented("sparse initializers are not supported");
  RETURN_IF_ERROR(ImportInitializers(graph));
  for (const auto& input : graph.input()) RETURN_IF_ERROR(ImportInput(input));
  for (int i = 0; i < graph.node_size(); ++i) RETURN_IF_ERROR(ImportNode(graph.node(i), i));
  if (graph.output_size() == 0) return InvalidArgument("the graph has no outputs");
  for (const auto& output : graph.output()) RETURN_IF_ERROR(ImportOutput(output));
  ASSIGN_OR_RETURN(Graph built, builder_.Build());
  symbolic_.values = dim_values_;
  if (!symbolic_.values.empty()) built.set_symbolic_inputs(std::move(symbolic_));
  return built;
}

Status GraphImporter::ImportInitializers(const onnx::GraphProto& graph) {
  std::map<std::string, Tensor>* cache = options_.initializer_cache;
  for (const auto& init : graph.initializer()) {
    Tensor value;  // a copy of a cached tensor shares its bytes
    if (auto hit = cache ? cache->find(init.name()) : std::map<std::string, Tensor>::iterator{}; cache && hit != cache->end()) {
      value = hit->second;
    } else {
      StatusOr<Tensor> decoded = TensorFromProto(init, base_dir_);
      if (!decoded.ok()) return decoded.status().WithContext(fmt::format("initializer '{}'", init.name()));
      value = std::move(decoded).value();
      if (cache) cache->emplace(init.name(), value);
    }
    builder_.SetLocation(fmt::format("initializer '{}'", init.name()), init.name());
    RETURN_IF_ERROR(Define(init.name(), builder_.Constant(std::move(value))));
  }
  return builder_.status();
}

Status GraphImporter::ImportInput(const onnx::ValueInfoProto& input) {
  // Old exporters list initializers among the inputs too; those are constants.
  if (values_.count(input.name())) return Status::Ok();
  std::string label = fmt::format("input '{}'", input.name());
  if (!input.type().has_tensor_type()) return Unimplemented(fmt::format("{} is not a tensor", label));
  const int position = input_position_++;
  auto bound = options_.bound_inputs.find(input.name());
  if (bound != options_.bound_inputs.end()) return BindInput(input, bound->second);
  const auto& type = input.type().tensor_type();
  ASSIGN_OR_RETURN(DType dtype, RequireDType(type.elem_type(), label));
  if (!type.has_shape()) return InvalidArgument(fmt::format("{} has no shape; tilefuse needs static shapes", label));
  Shape shape;
  std::vector<std::string> symbols(type.shape().dim_size());
  for (int d = 0; d < type.shape().dim_size(); ++d) {
    const auto& dim = type.shape().dim(d);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    ASSIGN_OR_RETURN(int64_t value, SymbolicDimValue(label, dim, d, position));
    shape.push_back(value);
    if (dim.has_dim_param()) symbols[d] = dim.dim_param();
  }
  if (std::any_of(symbols.begin(), symbols.end(), [](const std::string& s) { return !s.empty(); }))
    symbolic_.dims[input.name()] = std::move(symbols);
  if (shape.size() > 8) return Unimplemented(fmt::format("{} has rank {} (above 8)", label, shape.size()));
  RETURN_IF_ERROR(CheckShapeSize(shape, kMaxValueElements, label));
  builder_.SetLocation(label, input.name());
  return Define(input.name(), builder_.Parameter(input.name(), dtype, shape));
}

// A symbolic dim's value: given by name, else from the shape of the input the run is given
// (which then binds the name for every later input). A model is compiled for one value of
// each symbol.
StatusOr<int64_t> GraphImporter::SymbolicDimValue(const std::string& label, const onnx::TensorShapeProto::Dimension& dim, int d,
                                                  int position) {
  const std::string name = dim.has_dim_param() ? dim.dim_param() : "";
  auto known = name.empty() ? dim_values_.end() : dim_values_.find(name);
  if (known == dim_values_.end() && !name.empty()) {
    if (auto given = options_.dims.find(name); given != options_.dims.end()) {
      if (given->second < 0) return InvalidArgument(fmt::format("symbolic dim '{}' is given the value {}", name, given->second));
      known = dim_values_.emplace(name, given->second).first;
    }
  }
  const bool shaped = position < static_cast<int>(options_.input_shapes.size()) &&
                      d < static_cast<int>(options_.input_shapes[position].size());
  if (known != dim_values_.end()) {
    if (shaped && options_.input_shapes[position][d] != known->second)
      return InvalidArgument(fmt::format("{} is given with dim {} ('{}') = {}, but '{}' is {} ({})", label, d, name,
                                         options_.input_shapes[position][d], name, known->second,
                                         bound_by_.count(name) ? "from " + bound_by_[name] + "'s shape" : "as given"));
    return known->second;
  }
  if (shaped) {
    const int64_t value = options_.input_shapes[position][d];
    if (!name.empty()) {
      dim_values_[name] = value;
      bound_by_[name] = label;
    }
    return value;
  }
  const std::string shown = name.empty() ? "NAME" : name;
  return InvalidArgument(fmt::format("{} has symbolic dim {} ('{}'): give its value (--shape {}=N; dims={{'{}': N}} in Python) or inputs "
                                     "that fix it",
                                     label, d, name.empty() ? "?" : name, shown, shown));
}

Status GraphImporter::BindInput(const onnx::ValueInfoProto& input, const Tensor& value) {
  std::string label = fmt::format("input '{}'", input.name());
  const auto& type = input.type().tensor_type();
  bool fits = DTypeFromOnnx(type.elem_type()) == value.dtype() &&
              (!type.has_shape() || type.shape().dim_size() == value.rank());
  for (int d = 0; fits && type.has_shape() && d < value.rank(); ++d)
    fits = !type.shape().dim(d).has_dim_value() || type.shape().dim(d).dim_value() == value.shape()[d];
  if (!fits)
    return InvalidArgument(fmt::format("the value bound to {} is {} {}, which the input's declared type does not admit",
                                       label, DTypeName(value.dtype()), ShapeToString(value.shape())));
  builder_.SetLocation(label, input.name());
  return Define(input.name(), builder_.Constant(value));
}

Status GraphImporter::Define(const std::string& name, Value v) {
  RETURN_IF_ERROR(builder_.status());
  if (name.empty()) return Status::Ok();
  if (!values_.emplace(name, v).second || unavailable_.count(name))
    return InvalidArgument(fmt::format("value '{}' is defined twice", name));
  return Status::Ok();
}

StatusOr<Value> GraphImporter::Lookup(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto missing = unavailable_.find(name);
  if (missing != unavailable_.end()) return Unimplemented(missing->second);
  return InvalidArgument(fmt::format("value '{}' is not defined before its use (is the graph in topological order?)", name));
}

StatusOr<std::vector<Value>> GraphImporter::NodeInputs(const onnx::NodeProto& node, const OpSpec& spec) const {
  int count = node.input_size();
  if (count < spec.min_inputs || (spec.max_inputs >= 0 && count > spec.max_inputs)) {
    std::string expected = spec.max_inputs < 0 ? fmt::format("at least {}", spec.min_inputs)
                           : spec.min_inputs == spec.max_inputs
                               ? fmt::format("{}", spec.min_inputs)
                               : fmt::format("{} to {}", spec.min_inputs, spec.max_inputs);
    return InvalidArgument(fmt::format("{} takes {} inputs, got {}", node.op_type(), expected, count));
  }
  std::vector<Value> inputs;
  for (int i = 0; i < count; ++i) {
    if (node.input(i).empty()) {
      if (i < spec.min_inputs) return InvalidArgument(fmt::format("required input {} is empty", i));
      inputs.push_back(Value{});
      continue;
    }
    ASSIGN_OR_RETURN(Value v, Lookup(node.input(i)));
    inputs.push_back(v);
  }
  return inputs;
}

Status GraphImporter::ImportNode(const onnx::NodeProto& node, int index) {
  std::string name = !node.name().empty() ? node.name() : node.output_size() > 0 ? node.output(0) : fmt::format("#{}", index);
  std::string location = fmt::format("node '{}' ({}, opset {})", name, node.op_type(), opset_);
  builder_.SetLocation(location, name);
  if (!IsDefaultDomain(node.domain()))
    return Unimplemented(fmt::format("{}: unsupported op {}.{}", location, node.domain(), node.op_type()));
  // Before opset 7, binary ops broadcast only when told to, along an `axis`.
  if (opset_ < 7)
    for (const auto& attr : node.attribute())
      if (attr.name() == "broadcast")
        return Unimplemented(fmt::format("{}: the legacy 'broadcast' attribute is not supported", location));
  const OpSpec* spec = OpRegistry::Get().Find(node.op_type());
  if (!spec) return Unimplemented(fmt::format("{}: unsupported op {}", location, node.op_type()));
  RETURN_IF_ERROR(CheckOpMeaningAtOpset(node.op_type(), opset_).WithContext(location));
  RETURN_IF_ERROR(CheckAttributeTypes(node, opset_).WithContext(location));
  StatusOr<std::vector<Value>> inputs = NodeInputs(node, *spec);
  if (!inputs.ok()) return inputs.status().WithContext(location);

  int first_new_node = builder_.graph().num_nodes();
  NodeContext ctx(node, opset_, index, base_dir_, std::move(inputs).value(), builder_, constants_);
  Status status = spec->handler(ctx);
  RETURN_IF_ERROR(builder_.status());  // already names the location
  if (!status.ok()) return status.WithContext(location);
  // Shapes computed from attributes and constant inputs (Expand, Tile, Pad, ...) can be
  // absurd; everything after this (folding, passes, memory plans) counts their elements.
  for (int id = first_new_node; id < builder_.graph().num_nodes(); ++id)
    RETURN_IF_ERROR(CheckShapeSize(builder_.graph().node(id).shape, kMaxValueElements, "its result").WithContext(location));
  constants_.FoldNewNodes(builder_, first_new_node);

  for (int i = 0; i < node.output_size(); ++i) {
    const std::string& output = node.output(i);
    if (output.empty()) continue;
    if (ctx.outputs()[i].valid()) {
      RETURN_IF_ERROR(Define(output, ctx.outputs()[i]).WithContext(location));
    } else if (!values_.count(output) && !unavailable_.count(output)) {
      unavailable_[output] = fmt::format("{}: output {} ('{}') is not supported", location, i, output);
    } else {
      return InvalidArgument(fmt::format("{}: value '{}' is defined twice", location, output));
    }
  }
  return Status::Ok();
}

Status GraphImporter::ImportOutput(const onnx::ValueInfoProto& output) {
  ASSIGN_OR_RETURN(Value v, Lookup(output.name()));
  std::string label = fmt::format("output '{}'", output.name());
  const Node& node = builder_.node(v);
  if (output.type().has_tensor_type()) {
    const auto& type = output.type().tensor_type();
    std::optional<DType> declared = DTypeFromOnnx(type.elem_type());
    if (type.elem_type() != 0 && declared != node.dtype)
      return InvalidArgument(fmt::format("{} is declared {} but the graph computes {}", label,
                                         OnnxTypeName(type.elem_type()), DTypeName(node.dtype)));
    bool rank_ok = !type.has_shape() || type.shape().dim_size() == node.rank();
    for (int d = 0; rank_ok && type.has_shape() && d < node.rank(); ++d) {
      const auto& dim = type.shape().dim(d);
      rank_ok = !dim.has_dim_value() || dim.dim_value() == node.shape[d];
    }
    if (!rank_ok)
      return InvalidArgument(fmt::format("{} is declared with a shape that differs from the computed {}", label,
                                         ShapeToString(node.shape)));
  }
  builder_.SetLocation(label, output.name());
  builder_.Output(v, output.name());
  return builder_.status();
}

}  // namespace

StatusOr<ImportedModel> ImportModelProto(const onnx::ModelProto& model, const std::string& base_dir,
                                        const ImportOptions& options) {
  if (!model.has_graph()) return InvalidArgument("the model has no graph");
  ASSIGN_OR_RETURN(int64_t opset, DefaultOpset(model));
  for (const auto& [name, value] : options.bound_inputs) {
    bool found = false;
    for (const auto& input : model.graph().input()) found = found || input.name() == name;
    if (!found) return InvalidArgument(fmt::format("a value is bound to '{}', which is not an input of the graph", name));
  }
  GraphImporter importer(opset, base_dir, options);
  ASSIGN_OR_RETURN(Graph graph, importer.Import(model.graph()));
  ImportedModel imported{std::move(graph), {}};
  imported.info.opset = opset;
  imported.info.producer = model.producer_name();
  if (!model.producer_version().empty()) imported.info.producer += " " + model.producer_version();
  imported.info.num_onnx_nodes = model.graph().node_size();
  return imported;
}

}  // namespace tilefuse::onnx_import
