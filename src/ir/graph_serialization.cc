#include "ir/graph_serialization.h"

#include <cstring>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/verifier.h"

namespace tilefuse {

namespace {

using nlohmann::json;

// Layout: "tilefuse-graph v1\n", the JSON header's length in decimal and "\n", the header, then
// the constants' bytes one after another (each node's "value": [offset, bytes]).
constexpr std::string_view kMagic = "tilefuse-graph v1\n";

StatusOr<DType> DTypeOf(const json& name) {
  std::optional<DType> dtype = ParseDType(name.get<std::string>());
  if (!dtype) return InvalidArgument(fmt::format("unknown dtype '{}'", name.get<std::string>()));
  return *dtype;
}

// Every attribute but the constant's value, by name: written where it differs from a default
// Attrs, read back by name. A field of Attrs missing here would be lost by the compiled-model
// cache, and two graphs differing only in it would share a key.
constexpr auto kAttrFields = std::make_tuple(
    std::pair{"shape", &Attrs::shape}, std::pair{"axes", &Attrs::axes}, std::pair{"keepdims", &Attrs::keepdims},
    std::pair{"axis", &Attrs::axis}, std::pair{"perm", &Attrs::perm}, std::pair{"starts", &Attrs::starts},
    std::pair{"steps", &Attrs::steps}, std::pair{"to", &Attrs::to}, std::pair{"saturate", &Attrs::saturate},
    std::pair{"seed", &Attrs::seed}, std::pair{"epsilon", &Attrs::epsilon},
    std::pair{"approximate_tanh", &Attrs::approximate_tanh}, std::pair{"scale", &Attrs::scale},
    std::pair{"causal", &Attrs::causal}, std::pair{"kernel", &Attrs::kernel},
    std::pair{"strides", &Attrs::strides}, std::pair{"pads", &Attrs::pads}, std::pair{"dilations", &Attrs::dilations},
    std::pair{"group", &Attrs::group}, std::pair{"count_include_pad", &Attrs::count_include_pad}, std::pair{"tf32", &Attrs::tf32});

json FieldJson(DType dtype) { return std::string(DTypeName(dtype)); }
template <typename T>
json FieldJson(const T& value) {
  return value;
}

Status ReadField(const json& j, DType& out) {
  ASSIGN_OR_RETURN(out, DTypeOf(j));
  return Status::Ok();
}
template <typename T>
Status ReadField(const json& j, T& out) {
  out = j.get<T>();
  return Status::Ok();
}

json AttrsJson(const Attrs& a) {
  const Attrs d;
  json j = json::object();
  std::apply([&](const auto&... field) { ((a.*field.second != d.*field.second ? (void)(j[field.first] = FieldJson(a.*field.second)) : void()), ...); },
             kAttrFields);
  return j;
}

Status ReadAttrs(const json& j, Attrs& a) {
  for (auto item = j.begin(); item != j.end(); ++item) {  // (not structured bindings: clang 14's lambdas cannot capture them)
    const std::string& key = item.key();
    const json& value = item.value();
    Status read = InvalidArgument(fmt::format("unknown attribute '{}'", key));
    std::apply([&](const auto&... field) { ((key == field.first ? (void)(read = ReadField(value, a.*field.second)) : void()), ...); },
               kAttrFields);
    RETURN_IF_ERROR(read);
  }
  return Status::Ok();
}

StatusOr<Graph> ReadGraph(const json& header, std::string_view data) {
  Graph graph;
  for (const json& j : header.at("nodes")) {
    Node node;
    const OpInfo* op = FindOpByName(j.at("op").get<std::string>());
    if (!op) return InvalidArgument(fmt::format("unknown op '{}'", j.at("op").get<std::string>()));
    node.op = op->code;
    node.inputs = j.at("in").get<std::vector<int>>();
    for (int input : node.inputs)
      if (input < 0 || input >= graph.num_nodes()) return InvalidArgument(fmt::format("node {} reads node {}", graph.num_nodes(), input));
    ASSIGN_OR_RETURN(node.dtype, DTypeOf(j.at("dtype")));
    node.shape = j.at("shape").get<Shape>();
    node.name = j.at("name").get<std::string>();
    RETURN_IF_ERROR(ReadAttrs(j.at("attrs"), node.attrs));
    if (j.contains("value")) {
      const auto offset = j["value"][0].get<uint64_t>(), bytes = j["value"][1].get<uint64_t>();
      ASSIGN_OR_RETURN(DType dtype, DTypeOf(j["value"][2]));
      Tensor value = Tensor::Uninitialized(dtype, j["value"][3].get<Shape>());
      if (offset > data.size() || bytes > data.size() - offset || bytes != value.num_bytes())
        return InvalidArgument(fmt::format("node {}'s constant lies outside the data", graph.num_nodes()));
      if (bytes > 0) std::memcpy(value.data(), data.data() + offset, bytes);
      node.attrs.value = std::make_shared<const Tensor>(std::move(value));
    } else if (node.op == OpCode::kConstant) {
      return InvalidArgument(fmt::format("constant node {} has no value", graph.num_nodes()));
    }
    graph.AddNode(std::move(node));
  }
  for (const json& o : header.at("outputs")) {
    const int node = o.at(0).get<int>();
    if (node < 0 || node >= graph.num_nodes()) return InvalidArgument(fmt::format("output of node {}", node));
    graph.AddOutput(node, o.at(1).get<std::string>());
  }
  if (header.contains("symbolic_inputs")) {
    const json& symbolic = header["symbolic_inputs"];
    graph.set_symbolic_inputs({symbolic.at("dims").get<std::map<std::string, std::vector<std::string>>>(),
                               symbolic.at("values").get<std::map<std::string, int64_t>>()});
  }
  return graph;
}

}  // namespace

std::string SerializeGraph(const Graph& graph) {
  json nodes = json::array();
  std::string data;
  for (const Node& n : graph.nodes()) {
    json j = {{"op", std::string(OpName(n.op))}, {"in", n.inputs},   {"dtype", std::string(DTypeName(n.dtype))},
              {"shape", n.shape},                {"name", n.name},   {"attrs", AttrsJson(n.attrs)}};
    if (n.attrs.value) {
      const Tensor& v = *n.attrs.value;
      j["value"] = {data.size(), v.num_bytes(), std::string(DTypeName(v.dtype())), v.shape()};
      data.append(reinterpret_cast<const char*>(v.data()), v.num_bytes());
    }
    nodes.push_back(std::move(j));
  }
  json outputs = json::array();
  for (const Graph::Output& o : graph.outputs()) outputs.push_back({o.node, o.name});
  json header_json = {{"nodes", std::move(nodes)}, {"outputs", std::move(outputs)}};
  if (!graph.symbolic_inputs().empty())
    header_json["symbolic_inputs"] = {{"dims", graph.symbolic_inputs().dims}, {"values", graph.symbolic_inputs().values}};
  const std::string header = header_json.dump();
  return fmt::format("{}{}\n{}{}", kMagic, header.size(), header, data);
}

StatusOr<Graph> DeserializeGraph(std::string_view bytes) {
  if (bytes.substr(0, kMagic.size()) != kMagic) return InvalidArgument("not a serialized tilefuse graph");
  bytes.remove_prefix(kMagic.size());
  const size_t newline = bytes.find('\n');
  size_t header_size = 0;
  if (newline == std::string_view::npos || newline == 0 || newline > 20) return InvalidArgument("a serialized graph without its header length");
  for (char c : bytes.substr(0, newline)) {
    if (c < '0' || c > '9') return InvalidArgument("a serialized graph without its header length");
    header_size = header_size * 10 + static_cast<size_t>(c - '0');
  }
  bytes.remove_prefix(newline + 1);
  if (header_size > bytes.size()) return InvalidArgument("a serialized graph cut short");
  StatusOr<Graph> graph = InvalidArgument("unread");
  try {
    const json header = json::parse(bytes.substr(0, header_size));
    graph = ReadGraph(header, bytes.substr(header_size));
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("a damaged serialized graph: {}", e.what()));
  }
  if (!graph.ok()) return graph.status().WithContext("a damaged serialized graph");
  RETURN_IF_ERROR(VerifyGraph(*graph).WithContext("a serialized graph"));
  return graph;
}

int64_t ConstantBytes(const Graph& graph) {
  int64_t bytes = 0;
  for (const Node& n : graph.nodes())
    if (n.attrs.value) bytes += static_cast<int64_t>(n.attrs.value->num_bytes());
  return bytes;
}

}  // namespace tilefuse
