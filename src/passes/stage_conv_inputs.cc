#include "passes/stage_conv_inputs.h"

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}, kToNchw = {0, 3, 1, 2}, kColumns = {0, 2, 3, 4, 5, 1};

bool IsTranspose(const Node& n, const std::vector<int64_t>& perm) { return n.op == OpCode::kTranspose && n.attrs.perm == perm; }

// A window of the channels-last convolution's form (passes/window_ops.h) over an NCHW value
// the implicit GEMM could read once it is NHWC.
bool ReadsNchwForImplicitGemm(const Graph& g, const std::vector<std::vector<int>>& users, const Node& window) {
  if (window.op != OpCode::kWindow || window.attrs.kernel.size() != 2) return false;
  const Node& x = g.node(window.inputs[0]);
  if (IsTranspose(x, kToNchw) || x.rank() != 4 || x.shape[1] % 64 != 0) return false;
  if (x.dtype != DType::kBF16 && x.dtype != DType::kF16) return false;
  const std::vector<int>& readers = users[window.id];
  return readers.size() == 1 && IsTranspose(g.node(readers[0]), kColumns);
}

}  // namespace

StatusOr<Graph> StageConvInputs(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  GraphRewriter rewriter(graph);
  std::vector<Value> staged(graph.num_nodes());  // one NHWC copy per value, however many windows read it
  for (const Node& node : graph.nodes()) {
    if (!ReadsNchwForImplicitGemm(graph, users, node)) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(node);
    GraphBuilder& b = rewriter.builder();
    Value& copy = staged[node.inputs[0]];
    if (!copy.valid()) copy = b.Transpose(inputs[0], kToNhwc);
    inputs[0] = b.Transpose(copy, kToNchw);
    rewriter.SetMap(node.id, b.AddNode(OpCode::kWindow, std::move(inputs), node.attrs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
