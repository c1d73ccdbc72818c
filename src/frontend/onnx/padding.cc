// Pad, in all four modes, as slices and concatenations per padded axis:
//
//   constant  [fill fill | a b c d | fill]      edge  [a a | a b c d | d]
//   reflect   [c b | a b c d | c]               wrap  [c d | a b c d | a]
//
// Negative pads crop. Pads (and axes) must be known at import; the constant fill may
// be any value.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

enum class PadMode { kConstant, kEdge, kReflect, kWrap };

struct AxisPad {
  int64_t axis, begin, end;
};

// The `count` elements that go before (or, with `at_end`, after) x along `axis`.
StatusOr<Value> PadPart(GraphBuilder& b, Value x, int64_t axis, int64_t count, bool at_end, PadMode mode, Value fill) {
  int64_t n = b.shape(x)[axis];
  Shape part_shape = b.shape(x);
  part_shape[axis] = count;
  if (mode == PadMode::kConstant) return b.BroadcastTo(fill, part_shape);
  if (n == 0) return InvalidArgument(fmt::format("cannot pad an empty axis {} in this mode", axis));
  switch (mode) {
    case PadMode::kEdge: {
      int64_t edge = at_end ? n - 1 : 0;
      return b.BroadcastTo(b.Slice(x, {edge}, {edge + 1}, {axis}, {1}), part_shape);
    }
    case PadMode::kReflect: {
      if (count > n - 1) return InvalidArgument(fmt::format("reflect pad {} needs more than {} elements", count, n));
      if (!at_end) return b.Slice(x, {count}, {0}, {axis}, {-1});
      int64_t stop = n - 2 - count;  // exclusive; -n - 1 reads as "before element 0"
      return b.Slice(x, {n - 2}, {stop < 0 ? -n - 1 : stop}, {axis}, {-1});
    }
    case PadMode::kWrap:
      if (count > n) return InvalidArgument(fmt::format("wrap pad {} exceeds the axis size {}", count, n));
      return at_end ? b.Slice(x, {0}, {count}, {axis}, {1}) : b.Slice(x, {n - count}, {n}, {axis}, {1});
    case PadMode::kConstant: break;
  }
  return Value{};
}

StatusOr<Value> PadAxis(GraphBuilder& b, Value x, AxisPad pad, PadMode mode, Value fill) {
  if (pad.begin < 0 || pad.end < 0) {  // crop first
    int64_t n = b.shape(x)[pad.axis];
    x = b.Slice(x, {std::max<int64_t>(-pad.begin, 0)}, {n - std::max<int64_t>(-pad.end, 0)}, {pad.axis}, {1});
    if (!b.ok()) return Value{};
  }
  std::vector<Value> parts;
  if (pad.begin > 0) {
    ASSIGN_OR_RETURN(Value before, PadPart(b, x, pad.axis, pad.begin, false, mode, fill));
    parts.push_back(before);
  }
  parts.push_back(x);
  if (pad.end > 0) {
    ASSIGN_OR_RETURN(Value after, PadPart(b, x, pad.axis, pad.end, true, mode, fill));
    parts.push_back(after);
  }
  return b.Concat(parts, pad.axis);
}

StatusOr<std::vector<AxisPad>> PadsPerAxis(NodeContext& ctx, int rank) {
  ASSIGN_OR_RETURN(auto pads, ctx.IntsAttrOrInput("pads", 1));
  if (!pads) return InvalidArgument("Pad needs pads");
  std::vector<int64_t> axes;
  if (ctx.HasInput(3)) {
    ASSIGN_OR_RETURN(axes, ctx.ConstInts(3, "axes"));
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads->size() != 2 * axes.size())
    return InvalidArgument(fmt::format("pads {} must have two entries per padded axis ({})", *pads, axes.size()));
  std::vector<AxisPad> result;
  for (int64_t pad : *pads)  // bounded: crops negate them, padded dims add them
    if (pad < -kMaxValueElements || pad > kMaxValueElements)
      return InvalidArgument(fmt::format("pads {} exceed {} in magnitude", *pads, kMaxValueElements));
  for (size_t i = 0; i < axes.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(axes[i], rank, "pad axis"));
    result.push_back({axis, (*pads)[i], (*pads)[axes.size() + i]});
  }
  return result;
}

Status ImportPad(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  std::string mode_name = ctx.String("mode", "constant");
  PadMode mode = mode_name == "edge" ? PadMode::kEdge : mode_name == "reflect" ? PadMode::kReflect
                 : mode_name == "wrap" ? PadMode::kWrap : PadMode::kConstant;
  if (mode == PadMode::kConstant && mode_name != "constant")
    return InvalidArgument(fmt::format("unknown pad mode '{}'", mode_name));
  ASSIGN_OR_RETURN(std::vector<AxisPad> pads, PadsPerAxis(ctx, b.rank(x)));
  Value fill = ctx.HasInput(2) ? b.Reshape(ctx.Input(2), {}) : ScalarLike(b, x, ctx.Float("value", 0.0));
  for (const AxisPad& pad : pads) {
    if (pad.begin == 0 && pad.end == 0) continue;
    ASSIGN_OR_RETURN(x, PadAxis(b, x, pad, mode, fill));
    if (!b.ok()) break;
  }
  ctx.SetOutput(0, x);
  return Status::Ok();
}

}  // namespace

void RegisterPaddingOps(OpRegistry& r) { r.Add("Pad", ImportPad, 1, 4); }

}  // namespace tilefuse::onnx_import
