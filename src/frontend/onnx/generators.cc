// Ops that create values: Constant, ConstantOfShape, Range, Trilu and EyeLike (masks
// made from iotas) and Dropout (a seeded Philox mask in training mode).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

Status ImportConstant(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  if (ctx.HasAttr("value")) {
    ASSIGN_OR_RETURN(Tensor value, ctx.TensorAttr("value"));
    ctx.SetOutput(0, b.Constant(std::move(value)));
  } else if (ctx.HasAttr("value_float")) {
    ctx.SetOutput(0, b.Scalar(ctx.Float("value_float", 0), DType::kF32));
  } else if (ctx.HasAttr("value_int")) {
    int64_t value = ctx.Int("value_int", 0);  // copied, not through f64: INT64_MAX must survive
    Tensor scalar(DType::kI64, {});
    std::memcpy(scalar.data(), &value, sizeof value);
    ctx.SetOutput(0, b.Constant(std::move(scalar)));
  } else if (ctx.HasAttr("value_floats")) {
    std::vector<double> values = ctx.Floats("value_floats");
    ctx.SetOutput(0, b.Constant(Tensor::FromDoubles(DType::kF32, {static_cast<int64_t>(values.size())}, values)));
  } else if (ctx.HasAttr("value_ints")) {
    std::vector<int64_t> ints = ctx.Ints("value_ints");
    Tensor value(DType::kI64, {static_cast<int64_t>(ints.size())});
    if (!ints.empty()) std::memcpy(value.data(), ints.data(), ints.size() * sizeof(int64_t));
    ctx.SetOutput(0, b.Constant(std::move(value)));
  } else if (ctx.HasAttr("sparse_value") || ctx.HasAttr("value_string") || ctx.HasAttr("value_strings")) {
    return Unimplemented("sparse and string constants are not supported");
  } else {
    return InvalidArgument("Constant has no value attribute");
  }
  return Status::Ok();
}

Status ImportConstantOfShape(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstInts(0, "shape"));
  for (int64_t d : shape)
    if (d < 0) return InvalidArgument(fmt::format("shape {} has a negative dim", shape));
  Tensor fill = Tensor::FromDoubles(DType::kF32, {}, {0.0});
  if (ctx.HasAttr("value")) {
    ASSIGN_OR_RETURN(Tensor value, ctx.TensorAttr("value"));
    if (value.num_elements() != 1)
      return InvalidArgument(fmt::format("attribute 'value' must hold one element, got {}", value.num_elements()));
    fill = value;
  }
  Value scalar = b.Reshape(b.Constant(fill), {});
  ctx.SetOutput(0, b.BroadcastTo(scalar, shape));
  return Status::Ok();
}

// Range(start, limit, delta) needs its inputs at import time, since they decide the
// output's shape. Up to kMaxConstantRange elements the result is a constant computed in
// f64; a longer one is start + iota * delta, so that a few bytes of model cannot make the
// importer fill gigabytes (f32 cannot count exactly beyond 2^24 anyway).
constexpr int64_t kMaxConstantRange = int64_t{1} << 24;

Status ImportRange(NodeContext& ctx) {
  ASSIGN_OR_RETURN(double start, ctx.ConstScalar(0, "start"));
  ASSIGN_OR_RETURN(double limit, ctx.ConstScalar(1, "limit"));
  ASSIGN_OR_RETURN(double delta, ctx.ConstScalar(2, "delta"));
  if (delta == 0) return InvalidArgument("Range delta must not be 0");
  GraphBuilder& b = ctx.b();
  DType dtype = b.dtype(ctx.Input(0));
  double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(count < double(int64_t{1} << 32))) return InvalidArgument(fmt::format("Range of {} elements is too large", count));
  auto length = static_cast<int64_t>(count);
  if (length > kMaxConstantRange) {
    ctx.SetOutput(0, b.AddScalar(b.MulScalar(b.Iota({length}, 0, dtype), delta), start));
    return Status::Ok();
  }
  std::vector<double> values;
  for (int64_t i = 0; i < length; ++i) values.push_back(start + static_cast<double>(i) * delta);
  ctx.SetOutput(0, b.Constant(Tensor::FromDoubles(dtype, {length}, values)));
  return Status::Ok();
}

// Trilu keeps the elements with col - row >= k (upper) or col - row <= k (lower) of
// the last two dims and zeroes the rest.
Status ImportTrilu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.rank(x) < 2) return InvalidArgument(fmt::format("Trilu needs rank >= 2, got {}", b.rank(x)));
  double k = 0;
  if (ctx.HasInput(1)) {
    ASSIGN_OR_RETURN(k, ctx.ConstScalar(1, "k"));
  }
  bool upper = ctx.Int("upper", 1) != 0;
  Shape x_shape = b.shape(x);
  Shape matrix(x_shape.end() - 2, x_shape.end());
  Value diagonal = b.Sub(b.Iota(matrix, 1, DType::kI64), b.Iota(matrix, 0, DType::kI64));
  Value keep = b.Binary(upper ? OpCode::kGreaterEqual : OpCode::kLessEqual, diagonal, b.Scalar(k, DType::kI64));
  ctx.SetOutput(0, b.Where(keep, x, ScalarLike(b, x, 0)));
  return Status::Ok();
}

// EyeLike: the 2-D shape of the input, 1 on the diagonal col - row == k, else 0; in the
// dtype attribute's type (default the input's).
Status ImportEyeLike(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.rank(x) != 2) return InvalidArgument(fmt::format("EyeLike needs a 2-D input, got rank {}", b.rank(x)));
  DType dtype = b.dtype(x);
  if (ctx.HasAttr("dtype")) {
    ASSIGN_OR_RETURN(dtype, RequireDType(static_cast<int32_t>(ctx.Int("dtype", 0)), "the EyeLike dtype"));
  }
  Shape shape = b.shape(x);
  Value diagonal = b.Sub(b.Iota(shape, 1, DType::kI64), b.Iota(shape, 0, DType::kI64));
  Value on = b.Binary(OpCode::kEqual, diagonal, b.Scalar(static_cast<double>(ctx.Int("k", 0)), DType::kI64));
  ctx.SetOutput(0, b.Where(on, b.Scalar(1, dtype), b.Scalar(0, dtype)));
  return Status::Ok();
}

// splitmix64: spreads node indices into unrelated seeds.
uint64_t DerivedSeed(int node_index) {
  uint64_t z = static_cast<uint64_t>(node_index) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Inference mode: identity, mask all true. Training mode: keep = uniform >= ratio,
// out = where(keep, x / (1 - ratio), 0), with the node's seed (or one derived from its
// position, so a model always drops the same elements).
Status ImportDropout(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  double ratio = ctx.opset() < 12 ? ctx.Float("ratio", 0.5) : 0.5;
  bool training = false;
  if (ctx.opset() >= 12 && ctx.HasInput(1)) {
    ASSIGN_OR_RETURN(ratio, ctx.ConstScalar(1, "ratio"));
  }
  if (ctx.opset() >= 12 && ctx.HasInput(2)) {
    ASSIGN_OR_RETURN(double mode, ctx.ConstScalar(2, "training_mode"));
    training = mode != 0;
  }
  if (ratio < 0 || ratio >= 1) return InvalidArgument(fmt::format("dropout ratio {} is outside [0, 1)", ratio));
  if (!training) {
    ctx.SetOutput(0, x);
    if (ctx.WantsOutput(1)) ctx.SetOutput(1, b.BroadcastTo(b.Scalar(1, DType::kBool), b.shape(x)));
    return Status::Ok();
  }
  uint64_t seed = ctx.HasAttr("seed") ? static_cast<uint64_t>(ctx.Int("seed", 0)) : DerivedSeed(ctx.node_index());
  Value uniform = b.RandomUniform(b.shape(x), DType::kF32, seed);
  Value keep = b.Binary(OpCode::kGreaterEqual, uniform, b.Scalar(ratio, DType::kF32));
  ctx.SetOutput(0, b.Where(keep, MulScalar(b, x, 1.0 / (1.0 - ratio)), ScalarLike(b, x, 0)));
  ctx.SetOutput(1, keep);
  return Status::Ok();
}

}  // namespace

void RegisterGeneratorOps(OpRegistry& r) {
  r.Add("Constant", ImportConstant, 0, 0);
  r.Add("ConstantOfShape", ImportConstantOfShape, 1, 1);
  r.Add("Range", ImportRange, 3, 3);
  r.Add("Trilu", ImportTrilu, 1, 2);
  r.Add("EyeLike", ImportEyeLike, 1, 1);
  r.Add("Dropout", ImportDropout, 1, 3);
}

}  // namespace tilefuse::onnx_import
