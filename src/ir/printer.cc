#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ir/symbolic_shapes.h"

namespace tilefuse {

namespace {
std::string TypeString(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

std::string AttrString(const Node& n) {
  const Attrs& a = n.attrs;
  switch (n.op) {
    case OpCode::kParameter: return fmt::format("\"{}\"", n.name);
    case OpCode::kConstant:
      if (a.value && a.value->num_elements() == 1) return fmt::format("{}", a.value->GetDouble(0));
      return fmt::format("<{} values>", a.value ? a.value->num_elements() : 0);
    case OpCode::kIota: return fmt::format("axis={}", a.axis);
    case OpCode::kRandomUniform: return fmt::format("seed={}", a.seed);
    case OpCode::kCast: return fmt::format("to={}{}", DTypeName(a.to), a.saturate ? "" : " saturate=0");
    case OpCode::kBroadcast: case OpCode::kReshape: return fmt::format("shape={}", ShapeToString(a.shape));
    case OpCode::kTranspose: return fmt::format("perm={}", a.perm);
    case OpCode::kSlice: return fmt::format("starts={} steps={}", a.starts, a.steps);
    case OpCode::kConcat: case OpCode::kGather: case OpCode::kGatherElements:
    case OpCode::kSoftmax: case OpCode::kLogSoftmax: return fmt::format("axis={}", a.axis);
    case OpCode::kLayerNorm: return fmt::format("axis={} epsilon={}", a.axis, a.epsilon);
    case OpCode::kGelu: return a.approximate_tanh ? "approximate=tanh" : "";
    case OpCode::kConv: case OpCode::kMaxPool: case OpCode::kAveragePool:
      return fmt::format("kernel={} strides={} pads={} dilations={} group={}{}", a.kernel, a.strides, a.pads,
                         a.dilations, a.group, a.tf32 ? " tf32" : "");
    case OpCode::kMatMul: return a.tf32 ? "tf32" : "";
    case OpCode::kAttentionGradQ: case OpCode::kAttentionGradK: case OpCode::kAttentionGradV:
      return fmt::format("scale={}{}", a.scale, a.causal ? " causal" : "");
    case OpCode::kWindow:
      return fmt::format("kernel={} strides={} pads={} dilations={}", a.kernel, a.strides, a.pads, a.dilations);
    default: break;
  }
  if (n.info().kind == OpKind::Reduction) return fmt::format("axes={} keepdims={}", a.axes, a.keepdims ? 1 : 0);
  return "";
}
}  // namespace

std::string PrintNode(const Node& n) {
  std::string args;
  for (size_t i = 0; i < n.inputs.size(); ++i) args += fmt::format("{}%{}", i ? ", " : "", n.inputs[i]);
  std::string attrs = AttrString(n);
  if (!attrs.empty()) args += (args.empty() ? "" : ", ") + attrs;
  std::string line = fmt::format("%{} = {}({}) : {}", n.id, OpName(n.op), args, TypeString(n.dtype, n.shape));
  if (!n.name.empty() && n.op != OpCode::kParameter) line += fmt::format("    # '{}'", n.name);
  return line;
}

namespace {

// "[batch, sequence * 12, 64]" where a dim is one of the model's symbolic sizes, else "".
std::string SymbolicDims(const SymbolicShapes& symbolic, const Node& n) {
  if (symbolic.empty()) return "";
  const std::vector<SymExpr>& dims = symbolic.dims.at(static_cast<size_t>(n.id));
  if (std::all_of(dims.begin(), dims.end(), [](const SymExpr& d) { return d.IsConstant(); })) return "";
  std::string text;
  for (size_t d = 0; d < dims.size(); ++d) text += (d ? ", " : "") + dims[d].Print(symbolic.names);
  return "[" + text + "]";
}

}  // namespace

std::string PrintGraph(const Graph& graph) {
  const SymbolicShapes symbolic = InferSymbolicShapes(graph);
  std::string out;
  if (!symbolic.empty()) {
    out = "symbols(";
    for (size_t i = 0; i < symbolic.names.size(); ++i) out += fmt::format("{}{} = {}", i ? ", " : "", symbolic.names[i], symbolic.values[i]);
    out += ")\n";
  }
  out += "graph(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    out += fmt::format("{}%{} \"{}\": {}", i ? ", " : "", p.id, p.name, TypeString(p.dtype, p.shape));
    if (const std::string dims = SymbolicDims(symbolic, p); !dims.empty()) out += " = " + dims;
  }
  out += ") {\n";
  for (const Node& n : graph.nodes())
    if (n.op != OpCode::kParameter) {
      const std::string dims = SymbolicDims(symbolic, n);
      out += "  " + PrintNode(n) + (dims.empty() ? "" : "    # dims " + dims) + "\n";
    }
  for (const Graph::Output& o : graph.outputs()) out += fmt::format("  output \"{}\" = %{}\n", o.name, o.node);
  return out + "}\n";
}

}  // namespace tilefuse
