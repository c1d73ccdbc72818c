// The graph IR: an SSA DAG of single-output Nodes, each with a dtype and a static
// shape. Node ids index Graph::nodes() and are in topological order: a node's inputs
// always have smaller ids. Passes rebuild graphs rather than mutate them in place,
// which keeps that order for free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tilefuse/dtype.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

enum class OpCode : uint8_t {
#define TF_OP(Enum, name, arity, kind, result, expr) k##Enum,
#include "tilefuse/ops.def"
#undef TF_OP
};

enum class OpKind : uint8_t { Source, Pointwise, Broadcast, View, Reduction, Contraction, Opaque, Composite };
enum class ResultDType : uint8_t { Same, Bool, To };

struct OpInfo {
  OpCode code;
  std::string_view name;
  int arity;  // -1: one or more
  OpKind kind;
  ResultDType result;
  std::string_view scalar_expr;  // pointwise ops: expression over a, b, c; else "0"
};

const OpInfo& GetOpInfo(OpCode op);
inline bool IsAttentionGrad(OpCode op) {
  return op == OpCode::kAttentionGradQ || op == OpCode::kAttentionGradK || op == OpCode::kAttentionGradV;
}
std::string_view OpName(OpCode op);
std::string_view OpKindName(OpKind kind);
const OpInfo* FindOpByName(std::string_view name);  // nullptr when unknown
int NumOps();

// Typed attributes; each op reads the fields its row in ops.def names.
struct Attrs {
  Shape shape;                          // reshape, broadcast, iota, random_uniform, parameter
  std::vector<int64_t> axes;            // reductions: sorted, non-negative
  bool keepdims = false;                // reductions
  int64_t axis = 0;                     // concat, gather, softmax, layer_norm (first normalized axis), iota
  std::vector<int64_t> perm;            // transpose
  std::vector<int64_t> starts, steps;   // slice, one entry per dim, starts in range
  DType to = DType::kF32;               // cast, parameter, constant, iota, random_uniform
  // cast to an 8-bit float: an out-of-range value to the largest finite one (ONNX's default),
  // else to f8e5m2's infinity or f8e4m3's NaN
  bool saturate = true;
  uint64_t seed = 0;                    // random_uniform
  double epsilon = 0;                   // layer_norm
  bool approximate_tanh = false;        // gelu
  double scale = 0;                     // attention_grad_*: the factor of the scores q·kᵀ
  bool causal = false;                  // attention_grad_*: key j seen by query i only when j <= i
  // conv / pooling (spatial dims only; pads = begins then ends)
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t group = 1;
  bool count_include_pad = false;
  // conv, matmul: f32 operands may go to the tensor cores as TF32 (PyTorch's
  // torch.backends.cudnn.allow_tf32 for a convolution, on by default there), whatever the
  // compile's f32 precision; ignored where a backend computes f32 exactly anyway (the CPU).
  bool tf32 = false;
  std::shared_ptr<const Tensor> value;  // constant
};

struct Node {
  int id = -1;
  OpCode op = OpCode::kParameter;
  std::vector<int> inputs;
  Attrs attrs;
  DType dtype = DType::kF32;
  Shape shape;
  // Where the node came from: the ONNX node name (or output name) for imported nodes,
  // the parameter name for inputs. Nodes made by decomposing a composite keep its name.
  std::string name;

  const OpInfo& info() const { return GetOpInfo(op); }
  int rank() const { return static_cast<int>(shape.size()); }
};

// The model's symbolic input dims (ONNX dim_param) beside the values its static shapes were
// bound to: which dim of which input is which symbol, and each symbol's value. Shapes stay
// concrete; ir/symbolic_shapes.h says what every node's dims are in these symbols, so the
// kernels can take the sizes derived from them at launch (one kernel for every binding).
struct SymbolicInputs {
  std::map<std::string, std::vector<std::string>> dims;  // parameter name -> each dim's symbol ("" where static)
  std::map<std::string, int64_t> values;                 // symbol -> its value in this graph
  bool empty() const { return values.empty(); }
  bool operator==(const SymbolicInputs&) const = default;
};

class Graph {
 public:
  struct Output {
    int node;
    std::string name;
  };

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(id); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::vector<int>& inputs() const { return inputs_; }  // parameter node ids
  const std::vector<Output>& outputs() const { return outputs_; }

  // For builders and passes. AddNode assigns the id; inputs must already exist.
  int AddNode(Node node);
  void AddOutput(int node, std::string name) { outputs_.push_back({node, std::move(name)}); }
  // For each node, the ids of the nodes that use it (in id order, repeated per use).
  std::vector<std::vector<int>> ComputeUsers() const;

  // Passes keep it (GraphRewriter copies it into the graph it builds).
  const SymbolicInputs& symbolic_inputs() const { return symbolic_inputs_; }
  void set_symbolic_inputs(SymbolicInputs symbolic) { symbolic_inputs_ = std::move(symbolic); }

 private:
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<Output> outputs_;
  SymbolicInputs symbolic_inputs_;
};

}  // namespace tilefuse
