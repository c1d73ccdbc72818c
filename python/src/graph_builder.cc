// tilefuse._tilefuse.GraphBuilder: tilefuse/builder.h for Python, so a frontend written in
// Python (tilefuse.fx, PyTorch's FX graphs) builds the IR directly. Values are node ids
// (ints); ops are named as in ops.def ("add", "reduce_sum"), dtypes as DTypeName ("bf16").
// The builder records the first error and ignores later calls, as in C++; `build()` raises
// it as tilefuse.Error, prefixed with the location set last (the FX node).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tilefuse/builder.h"

namespace tilefuse::python {
namespace {

using Ints = std::vector<int64_t>;

class PythonGraphBuilder {
 public:
  void SetLocation(std::string context, std::string name) { b_.SetLocation(std::move(context), std::move(name)); }
  bool ok() const { return b_.ok(); }
  std::string error() const { return b_.ok() ? "" : b_.status().ToString(); }

  int Parameter(std::string name, const std::string& dtype, Ints shape) {
    return b_.Parameter(std::move(name), ParseType(dtype), Shape(shape.begin(), shape.end())).id;
  }
  int Constant(const InputArray& array) { return b_.Constant(ToTensor(array, 0)).id; }
  int Scalar(double value, const std::string& dtype) { return b_.Scalar(value, ParseType(dtype)).id; }
  int Iota(Ints shape, int64_t axis, const std::string& dtype) {
    return b_.Iota(Shape(shape.begin(), shape.end()), axis, ParseType(dtype)).id;
  }

  // A pointwise op of the table by name, with as many inputs as its row says.
  int Pointwise(const std::string& name, const std::vector<int>& inputs) {
    const OpInfo* info = FindOpByName(name);
    if (info == nullptr || info->kind != OpKind::Pointwise || info->arity != static_cast<int>(inputs.size()) ||
        info->arity == 0) {
      Fail(fmt::format("no pointwise op '{}' of {} inputs in tilefuse's op table", name, inputs.size()));
      return -1;
    }
    if (info->code == OpCode::kWhere) return b_.Where(V(inputs[0]), V(inputs[1]), V(inputs[2])).id;
    if (info->code == OpCode::kCast) {
      Fail("cast takes a dtype: use cast()");
      return -1;
    }
    return inputs.size() == 1 ? b_.Unary(info->code, V(inputs[0])).id : b_.Binary(info->code, V(inputs[0]), V(inputs[1])).id;
  }
  int Cast(int x, const std::string& dtype) { return b_.Cast(V(x), ParseType(dtype)).id; }

  int BroadcastTo(int x, Ints shape) { return b_.BroadcastTo(V(x), Shape(shape.begin(), shape.end())).id; }
  int Reshape(int x, Ints shape) { return b_.Reshape(V(x), Shape(shape.begin(), shape.end())).id; }
  int Transpose(int x, Ints perm) { return b_.Transpose(V(x), std::move(perm)).id; }
  int Slice(int x, Ints starts, Ints ends, Ints axes, Ints steps) {
    return b_.Slice(V(x), std::move(starts), std::move(ends), std::move(axes), std::move(steps)).id;
  }
  int Squeeze(int x, Ints axes) { return b_.Squeeze(V(x), std::move(axes)).id; }
  int Unsqueeze(int x, Ints axes) { return b_.Unsqueeze(V(x), std::move(axes)).id; }
  int Concat(const std::vector<int>& xs, int64_t axis) {
    std::vector<Value> values;
    for (int x : xs) values.push_back(V(x));
    return b_.Concat(values, axis).id;
  }
  std::vector<int> Split(int x, int64_t axis, const Ints& sizes) {
    std::vector<int> ids;
    for (Value v : b_.Split(V(x), axis, sizes)) ids.push_back(v.id);
    return ids;
  }
  int Gather(int data, int indices, int64_t axis) { return b_.Gather(V(data), V(indices), axis).id; }
  int GatherElements(int data, int indices, int64_t axis) { return b_.GatherElements(V(data), V(indices), axis).id; }

  int Reduce(const std::string& name, int x, Ints axes, bool keepdims) {
    const OpInfo* info = FindOpByName(name);
    if (info == nullptr || info->kind != OpKind::Reduction) {
      Fail(fmt::format("no reduction '{}' in tilefuse's op table", name));
      return -1;
    }
    return b_.Reduce(info->code, V(x), std::move(axes), keepdims).id;
  }
  int MatMul(int a, int b) { return b_.MatMul(V(a), V(b)).id; }

  int Conv(int x, int w, std::optional<int> bias, Ints strides, Ints pads, Ints dilations, int64_t group, bool tf32) {
    PoolParams p;
    p.tf32 = tf32;
    const Shape w_shape = b_.ok() ? b_.shape(V(w)) : Shape{};
    if (w_shape.size() > 2) p.kernel.assign(w_shape.begin() + 2, w_shape.end());
    p.strides = std::move(strides);
    p.pads = std::move(pads);
    p.dilations = std::move(dilations);
    p.group = group;
    return b_.Conv(V(x), V(w), bias ? V(*bias) : Value{}, p).id;
  }
  int Pool(const std::string& kind, int x, Ints kernel, Ints strides, Ints pads, Ints dilations, bool count_include_pad) {
    PoolParams p{std::move(kernel), std::move(strides), std::move(pads), std::move(dilations), 1, count_include_pad};
    if (kind == "max") return b_.MaxPool(V(x), p).id;
    if (kind == "average") return b_.AveragePool(V(x), p).id;
    Fail(fmt::format("no pool '{}' (max or average)", kind));
    return -1;
  }

  int Softmax(int x, int64_t axis) { return b_.Softmax(V(x), axis).id; }
  int LogSoftmax(int x, int64_t axis) { return b_.LogSoftmax(V(x), axis).id; }
  int LayerNorm(int x, int scale, std::optional<int> bias, int64_t axis, double epsilon) {
    return b_.LayerNorm(V(x), V(scale), bias ? V(*bias) : Value{}, axis, epsilon).id;
  }
  int Gelu(int x, bool approximate_tanh) { return b_.Gelu(V(x), approximate_tanh).id; }
  // which: "q", "k" or "v" (the gradient returned).
  int AttentionGrad(const std::string& which, int dout, int q, int k, int v, int out, int logsumexp, double scale, bool causal) {
    if (which != "q" && which != "k" && which != "v") {
      Fail("attention_grad: which must be 'q', 'k' or 'v', not '" + which + "'");
      return -1;
    }
    const OpCode op = which == "q" ? OpCode::kAttentionGradQ : which == "k" ? OpCode::kAttentionGradK : OpCode::kAttentionGradV;
    return b_.AttentionGrad(op, V(dout), V(q), V(k), V(v), V(out), V(logsumexp), scale, causal).id;
  }

  std::string DType(int x) const { return Valid(x) ? std::string(DTypeName(b_.dtype(V(x)))) : ""; }
  Ints ShapeOf(int x) const {
    if (!Valid(x)) return {};
    const Shape shape = b_.shape(V(x));
    return Ints(shape.begin(), shape.end());
  }
  void Output(int x, std::string name) { b_.Output(V(x), std::move(name)); }
  Graph Build() {
    Graph graph = ValueOrThrow(b_.Build());
    graph.set_symbolic_inputs(symbolic_);
    return graph;
  }
  void SetSymbolicInputs(std::map<std::string, std::vector<std::string>> dims, std::map<std::string, int64_t> values) {
    symbolic_ = {std::move(dims), std::move(values)};
  }
  void Fail(std::string message) { b_.Fail(InvalidArgument(std::move(message))); }

 private:
  static Value V(int id) { return Value{id}; }
  bool Valid(int x) const { return b_.ok() && x >= 0 && x < b_.graph().num_nodes(); }
  tilefuse::DType ParseType(const std::string& name) {
    std::optional<tilefuse::DType> dtype = ParseDType(name);
    if (!dtype) {
      Fail(fmt::format("no dtype '{}' in tilefuse (f64, f32, f16, bf16, i64, i32, i8, u8, bool)", name));
      return tilefuse::DType::kF32;
    }
    return *dtype;
  }

  GraphBuilder b_;
  SymbolicInputs symbolic_;
};

}  // namespace

void BindGraphBuilder(nb::module_& m) {
  nb::class_<Graph>(m, "Graph", "A built graph: hand it to compile_graph")
      .def_prop_ro("num_nodes", &Graph::num_nodes)
      .def_prop_ro(
          "symbols", [](const Graph& g) { return g.symbolic_inputs().values; },
          "Its symbolic sizes and their values in this graph (Dynamo's s0, ...; empty where its shapes are all static)");
  using B = PythonGraphBuilder;
  nb::class_<B>(m, "GraphBuilder")
      .def(nb::init<>())
      .def("set_location", &B::SetLocation, nb::arg("context"), nb::arg("name"))
      .def_prop_ro("ok", &B::ok)
      .def_prop_ro("error", &B::error)
      .def("fail", &B::Fail, nb::arg("message"))
      .def("parameter", &B::Parameter, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"))
      .def("constant", &B::Constant, nb::arg("array"), "A constant copied from a C-contiguous CPU array")
      .def("scalar", &B::Scalar, nb::arg("value"), nb::arg("dtype"))
      .def("iota", &B::Iota, nb::arg("shape"), nb::arg("axis"), nb::arg("dtype"))
      .def("pointwise", &B::Pointwise, nb::arg("op"), nb::arg("inputs"))
      .def("cast", &B::Cast, nb::arg("x"), nb::arg("dtype"))
      .def("broadcast_to", &B::BroadcastTo, nb::arg("x"), nb::arg("shape"))
      .def("reshape", &B::Reshape, nb::arg("x"), nb::arg("shape"))
      .def("transpose", &B::Transpose, nb::arg("x"), nb::arg("perm"))
      .def("slice", &B::Slice, nb::arg("x"), nb::arg("starts"), nb::arg("ends"), nb::arg("axes"), nb::arg("steps"))
      .def("squeeze", &B::Squeeze, nb::arg("x"), nb::arg("axes"))
      .def("unsqueeze", &B::Unsqueeze, nb::arg("x"), nb::arg("axes"))
      .def("concat", &B::Concat, nb::arg("xs"), nb::arg("axis"))
      .def("split", &B::Split, nb::arg("x"), nb::arg("axis"), nb::arg("sizes"))
      .def("gather", &B::Gather, nb::arg("data"), nb::arg("indices"), nb::arg("axis"))
      .def("gather_elements", &B::GatherElements, nb::arg("data"), nb::arg("indices"), nb::arg("axis"))
      .def("reduce", &B::Reduce, nb::arg("op"), nb::arg("x"), nb::arg("axes"), nb::arg("keepdims"))
      .def("matmul", &B::MatMul, nb::arg("a"), nb::arg("b"))
      .def("conv", &B::Conv, nb::arg("x"), nb::arg("w"), nb::arg("bias").none(), nb::arg("strides"), nb::arg("pads"),
           nb::arg("dilations"), nb::arg("group"), nb::arg("tf32") = false,
           "A convolution; tf32: its f32 operands may go to the tensor cores as TF32 (PyTorch's cudnn.allow_tf32)")
      .def("pool", &B::Pool, nb::arg("kind"), nb::arg("x"), nb::arg("kernel"), nb::arg("strides"), nb::arg("pads"),
           nb::arg("dilations"), nb::arg("count_include_pad"))
      .def("softmax", &B::Softmax, nb::arg("x"), nb::arg("axis"))
      .def("log_softmax", &B::LogSoftmax, nb::arg("x"), nb::arg("axis"))
      .def("layer_norm", &B::LayerNorm, nb::arg("x"), nb::arg("scale"), nb::arg("bias").none(), nb::arg("axis"),
           nb::arg("epsilon"))
      .def("gelu", &B::Gelu, nb::arg("x"), nb::arg("approximate_tanh"))
      .def("attention_grad", &B::AttentionGrad, nb::arg("which"), nb::arg("dout"), nb::arg("q"), nb::arg("k"), nb::arg("v"),
           nb::arg("out"), nb::arg("logsumexp"), nb::arg("scale"), nb::arg("causal"),
           "Attention's gradient of q, k or v (which) from dout, the operands, the output and the logsumexp")
      .def("dtype", &B::DType, nb::arg("x"), "The value's dtype name, or '' after an error")
      .def("shape", &B::ShapeOf, nb::arg("x"), "The value's shape, or [] after an error")
      .def("output", &B::Output, nb::arg("x"), nb::arg("name"))
      .def("set_symbolic_inputs", &B::SetSymbolicInputs, nb::arg("dims"), nb::arg("values"),
           "Which dims of which parameters are symbols (by parameter name, '' where static) and the symbols' values: "
           "the kernels take the sizes they give at launch, so another binding reuses them")
      .def("build", &B::Build, "The verified graph; raises tilefuse.Error with the first error recorded");
}

}  // namespace tilefuse::python
