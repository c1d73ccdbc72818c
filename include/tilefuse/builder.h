// GraphBuilder: the C++ API for building graphs, used by the ONNX importer, the passes
// and users alike. Every call infers and checks the new node's dtype and shape. The
// first error is recorded (named after the current location, e.g. the ONNX node) and
// every later call becomes a no-op returning an invalid Value; Build() reports it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct Value {
  int id = -1;
  bool valid() const { return id >= 0; }
};

struct PoolParams {  // spatial dims only; pads = begins then ends
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t group = 1;             // conv
  bool count_include_pad = false;  // average pool
  bool tf32 = false;               // conv: Attrs::tf32
};

class GraphBuilder {
 public:
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Names the nodes created from now on and prefixes their errors, e.g.
  // SetLocation("node 'ln1' (LayerNormalization, opset 17)", "ln1").
  void SetLocation(std::string error_context, std::string node_name);
  // Records an error found by the caller (e.g. a bad ONNX attribute) at the location.
  void Fail(Status status);

  const Graph& graph() const { return graph_; }
  // A reference into the growing graph: it dangles once another node is added.
  const Node& node(Value v) const { return graph_.node(v.id); }
  DType dtype(Value v) const { return node(v).dtype; }
  // By value on purpose: `const Shape& s = b.shape(x); b.Add(...); use(s)` stays valid.
  Shape shape(Value v) const { return node(v).shape; }
  int rank(Value v) const { return node(v).rank(); }

  // ---- sources
  Value Parameter(std::string name, DType dtype, Shape shape);
  Value Constant(Tensor value);
  Value Constant(std::shared_ptr<const Tensor> value);  // the tensor itself, shared (passes/derived_constants.h)
  Value Scalar(double value, DType dtype);  // rank-0 constant
  Value Iota(Shape shape, int64_t axis, DType dtype);
  Value RandomUniform(Shape shape, DType dtype, uint64_t seed);

  // ---- pointwise (numpy broadcasting through explicit broadcast nodes)
  Value Unary(OpCode op, Value x);
  Value Binary(OpCode op, Value a, Value b);
  Value Where(Value cond, Value x, Value y);
  Value Cast(Value x, DType to);  // no node when x already has that dtype
  // A cast to an 8-bit float with its overflow rule (Attrs::saturate).
  Value Cast(Value x, DType to, bool saturate);
  Value Add(Value a, Value b) { return Binary(OpCode::kAdd, a, b); }
  Value Sub(Value a, Value b) { return Binary(OpCode::kSub, a, b); }
  Value Mul(Value a, Value b) { return Binary(OpCode::kMul, a, b); }
  Value Div(Value a, Value b) { return Binary(OpCode::kDiv, a, b); }
  // `x op scalar` with the scalar in x's dtype.
  // (x is checked first: after a failure it may be no node, and its dtype unreadable.)
  Value AddScalar(Value x, double s) { return CheckValues({x}) ? Add(x, Scalar(s, dtype(x))) : Value{}; }
  Value MulScalar(Value x, double s) { return CheckValues({x}) ? Mul(x, Scalar(s, dtype(x))) : Value{}; }

  // ---- broadcast and views
  Value BroadcastTo(Value x, Shape shape);  // no node when the shape already matches
  Value Reshape(Value x, Shape shape);      // fully specified; no node when unchanged
  Value Transpose(Value x, std::vector<int64_t> perm);
  // ONNX Slice semantics: negative indices count from the end, out-of-range bounds
  // are clamped, `axes` may be empty (= 0..n-1), `steps` empty (= all 1), step != 0.
  Value Slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends,
              std::vector<int64_t> axes, std::vector<int64_t> steps);
  Value Squeeze(Value x, std::vector<int64_t> axes);    // empty = every size-1 dim
  Value Unsqueeze(Value x, std::vector<int64_t> axes);  // axes of the output
  Value Concat(const std::vector<Value>& xs, int64_t axis);
  std::vector<Value> Split(Value x, int64_t axis, const std::vector<int64_t>& sizes);
  Value Gather(Value data, Value indices, int64_t axis);
  Value GatherElements(Value data, Value indices, int64_t axis);
  // Sliding windows of NCHW x: [N, C, out..., kernel...], `fill` (a scalar of x's dtype)
  // where a window reaches outside x (p.group and p.count_include_pad are not used).
  Value Window(Value x, Value fill, const PoolParams& p);

  // ---- reductions: negative axes allowed; empty axes = all axes
  Value Reduce(OpCode op, Value x, std::vector<int64_t> axes, bool keepdims);

  // ---- contraction: numpy matmul (1-D operands promoted and the added dim removed)
  Value MatMul(Value a, Value b, bool tf32 = false);  // tf32: Attrs::tf32

  // ---- opaque
  Value Conv(Value x, Value w, Value bias /* may be invalid */, const PoolParams& p);
  Value MaxPool(Value x, const PoolParams& p);
  Value AveragePool(Value x, const PoolParams& p);
  // One of attention's gradients (op: kAttentionGradQ, K or V; ops.def says what they take).
  Value AttentionGrad(OpCode op, Value dout, Value q, Value k, Value v, Value out, Value logsumexp, double scale, bool causal);

  // ---- composites (decomposed by passes/decompose)
  Value Softmax(Value x, int64_t axis);
  Value LogSoftmax(Value x, int64_t axis);
  Value LayerNorm(Value x, Value scale, Value bias /* may be invalid */, int64_t axis, double epsilon);
  Value Gelu(Value x, bool approximate_tanh);

  // The generic entry every method above ends in: infers dtype/shape and appends.
  Value AddNode(OpCode op, std::vector<Value> inputs, Attrs attrs);

  void Output(Value v, std::string name);
  // Verifies and returns the graph; the builder is left empty.
  StatusOr<Graph> Build();

 private:
  bool CheckValues(const std::vector<Value>& values);
  int64_t NormalizeAxis(int64_t axis, int rank);  // records an error when out of range
  Shape BroadcastShapes(const Shape& a, const Shape& b);

  Graph graph_;
  Status status_;
  std::string error_context_;
  std::string node_name_;
};

}  // namespace tilefuse
