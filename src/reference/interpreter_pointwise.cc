// Pointwise ops of the reference interpreter. The scalar semantics are not written
// here: the switch below is generated from ops.def, each case compiling the op's own
// scalar expression for double against src/ir/scalar_library.h.
#include "reference/interpreter_kernels.h"
#include "ir/scalar_library.h"
#include "support/check.h"
#include "support/philox.h"

namespace tilefuse::interpreter {

namespace {

// out[i] = fn(a[i], b[i], c[i]); operands an op does not have alias `a` and are never
// read by its expression.
template <typename Fn>
void MapElements(const std::vector<Operand>& in, Values& out, Fn fn) {
  const double* a = in[0].data();
  const double* b = in.size() > 1 ? in[1].data() : a;
  const double* c = in.size() > 2 ? in[2].data() : a;
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out[i] = fn(a[i], b[i], c[i]);
}

void ApplyScalarExpression(OpCode op, const std::vector<Operand>& in, Values& out) {
  using namespace tilefuse::scalar;
  switch (op) {
#define TF_OP(Enum, name, arity, kind, result, expr)                                          \
  case OpCode::k##Enum:                                                                      \
    MapElements(in, out, []([[maybe_unused]] double a, [[maybe_unused]] double b,            \
                            [[maybe_unused]] double c) { return static_cast<double>(expr); }); \
    return;
#include "tilefuse/ops.def"
#undef TF_OP
  }
}

// Iota: each element's index along attrs.axis.
void FillIota(const Node& node, Values& out) {
  const Shape& shape = node.shape;
  int axis = static_cast<int>(node.attrs.axis);
  int64_t inner = DimProduct(shape, axis + 1, static_cast<int>(shape.size()));
  int64_t extent = shape[axis];
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>((static_cast<int64_t>(i) / inner) % extent);
}

void FillRandomUniform(const Node& node, Values& out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = PhiloxUniform(node.attrs.seed, i);
}

}  // namespace

Status ComputePointwise(const Node& node, const std::vector<Operand>& in, Values& out) {
  if (node.op == OpCode::kIota) {
    FillIota(node, out);
    return Status::Ok();
  }
  if (node.op == OpCode::kRandomUniform) {
    FillRandomUniform(node, out);
    return Status::Ok();
  }
  TF_CHECK(node.info().kind == OpKind::Pointwise && !in.empty());
  for (const Operand& operand : in) TF_CHECK(operand.values->size() == out.size());
  ApplyScalarExpression(node.op, in, out);
  // A cast to an 8-bit float decides its overflow here (saturate, or f8e5m2's infinity and
  // f8e4m3's NaN); the store's rounding then keeps the value.
  if (node.op == OpCode::kCast && IsFloat8(node.attrs.to))
    for (double& v : out) v = Float8BitsToFloat(FloatToFloat8Bits(v, node.attrs.to, node.attrs.saturate), node.attrs.to);
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
