// NodeContext: what an op handler sees of one ONNX node — its inputs as graph Values
// (with their values when known at import time), its attributes, and its outputs.
//
// Errors: attribute getters record a type mismatch in the builder (named after the
// node) and return the fallback, so handlers stay short; anything a handler cannot go
// on without (a required constant input, a bad attribute value) returns a Status,
// which the importer prefixes with the node's location.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/onnx/constant_tracker.h"
#include "tilefuse/builder.h"

namespace tilefuse::onnx_import {

class NodeContext {
 public:
  NodeContext(const onnx::NodeProto& node, int64_t opset, int node_index, std::string base_dir,
              std::vector<Value> inputs, GraphBuilder& builder, const ConstantTracker& constants);

  GraphBuilder& b() { return builder_; }
  const onnx::NodeProto& proto() const { return node_; }
  const std::string& op_type() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  // Position of the node in the ONNX graph (seeds Dropout when it has no seed).
  int node_index() const { return node_index_; }

  // ---- inputs. The importer checks the op's required input count before the
  // handler runs, so Input(i) below that count is always valid.
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool HasInput(int i) const { return i < num_inputs() && inputs_[i].valid(); }
  Value Input(int i) const { return HasInput(i) ? inputs_[i] : Value{}; }
  std::vector<Value> Inputs() const;  // the present ones
  // The input's value when it is known at import time, else nullptr.
  const Tensor* KnownInput(int i) const;
  // Values that must be known at import time (shapes, axes, starts, ...).
  StatusOr<Tensor> ConstInput(int i, std::string_view what) const;
  StatusOr<std::vector<int64_t>> ConstInts(int i, std::string_view what) const;
  StatusOr<double> ConstScalar(int i, std::string_view what) const;

  // ---- attributes
  bool HasAttr(std::string_view name) const { return FindAttr(name) != nullptr; }
  int64_t Int(std::string_view name, int64_t fallback);
  double Float(std::string_view name, double fallback);
  std::string String(std::string_view name, std::string fallback);
  std::vector<int64_t> Ints(std::string_view name);
  std::vector<double> Floats(std::string_view name);
  StatusOr<Tensor> TensorAttr(std::string_view name);
  // An int list that older opsets give as attribute `attr` and newer ones as input
  // `input` (which must then be known at import time); nullopt when neither is given.
  StatusOr<std::optional<std::vector<int64_t>>> IntsAttrOrInput(std::string_view attr, int input);

  // ---- outputs
  int num_outputs() const { return node_.output_size(); }
  // True when the model names output i (an empty name means "not requested").
  bool WantsOutput(int i) const { return i < num_outputs() && !node_.output(i).empty(); }
  void SetOutput(int i, Value v);
  const std::vector<Value>& outputs() const { return outputs_; }

 private:
  const onnx::AttributeProto* FindAttr(std::string_view name) const;
  // Records "attribute 'name' must be <expected>" and returns false when `attr` has
  // the wrong type.
  bool CheckAttrType(const onnx::AttributeProto& attr, int expected_type, bool has_value, const char* expected);

  const onnx::NodeProto& node_;
  int64_t opset_;
  int node_index_;
  std::string base_dir_;
  std::vector<Value> inputs_;  // invalid Value for an omitted optional input
  std::vector<Value> outputs_;
  GraphBuilder& builder_;
  const ConstantTracker& constants_;
};

}  // namespace tilefuse::onnx_import
