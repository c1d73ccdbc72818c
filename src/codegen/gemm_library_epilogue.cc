#include "codegen/gemm_library_epilogue.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "ir/scalar_eval.h"

namespace tilefuse {

namespace {

enum class Role { kOther, kProduct, kBias };

bool AtColumn(const Index& index) {
  AffineIndex a;
  return !UsesValue(index) && AsAffine(index, &a) && a.c0 == 0 && a.c1 == 1 && a.offset == 0;
}

double Activate(LibraryActivation activation, double x) {
  switch (activation) {
    case LibraryActivation::kNone: return x;
    case LibraryActivation::kRelu: return x > 0 ? x : 0;
    case LibraryActivation::kGeluTanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  }
  return x;
}

// The program's value `root` for accumulator `acc` and bias `bias`.
double Evaluate(const Kernel& k, const std::vector<Role>& roles, int root, double acc, double bias) {
  std::vector<double> v(k.values.size(), 0.0);
  for (int i = 0; i <= root; ++i) {
    const ScalarValue& s = k.values[i];
    switch (s.kind) {
      case ScalarValue::Kind::kLoad: v[i] = roles[i] == Role::kProduct ? acc : bias; break;
      case ScalarValue::Kind::kConstant: v[i] = s.constant; break;
      case ScalarValue::Kind::kOp: {
        // Casts between float types round on store, as the library does after its epilogue.
        const double a = v[s.args[0]], b = s.args.size() > 1 ? v[s.args[1]] : 0, c = s.args.size() > 2 ? v[s.args[2]] : 0;
        v[i] = s.op == OpCode::kCast ? a : EvaluateScalarOp(s.op, a, b, c);
        break;
      }
      default: break;  // refused before evaluating
    }
  }
  return v[root];
}

// Does the program compute activation(acc + bias) at every probe? f32 programs to their
// constants' rounding (1e-6); half-precision ones to well inside their output's precision,
// since their constants are rounded to it (bf16's 0.7978845608 is 0.796875: the GELU it
// spells differs from the exact one by up to 3e-4).
bool Computes(const Kernel& k, const std::vector<Role>& roles, int root, LibraryActivation activation, bool with_bias, bool half) {
  const double accs[] = {-9.5, -4.25, -2, -1, -0.61, -0.125, -1e-3, 0, 1e-3, 0.3, 0.77, 1.5, 2.9, 5.5, 11};
  const double biases[] = {-1.375, -0.2, 0, 0.45, 2.1};
  for (double acc : accs)
    for (double bias : biases) {
      const double expected = Activate(activation, acc + (with_bias ? bias : 0));
      const double got = Evaluate(k, roles, root, acc, bias);
      const double tolerance = half ? 4e-3 * std::max(std::fabs(expected), 0.25) : 1e-7 + 1e-6 * std::fabs(expected);
      if (!(std::fabs(got - expected) <= tolerance)) return false;
    }
  return true;
}

bool HasOp(const Kernel& k, OpCode op) {
  for (const ScalarValue& s : k.values)
    if (s.kind == ScalarValue::Kind::kOp && s.op == op) return true;
  return false;
}

}  // namespace

std::string DescribeLibraryEpilogue(const LibraryEpilogue& e) {
  const char* act = e.activation == LibraryActivation::kRelu ? "relu" : e.activation == LibraryActivation::kGeluTanh ? "gelu_tanh" : "";
  if (e.bias < 0) return *act ? act : "none";
  return *act ? fmt::format("bias + {}", act) : "bias";
}

StatusOr<LibraryEpilogue> MatchLibraryEpilogue(const GemmTemplateKernel& g) {
  const Kernel& k = g.epilogue;
  if (k.stores.size() != 1) return Unimplemented(fmt::format("the epilogue writes {} values (the library writes one)", k.stores.size()));
  const KernelStore& store = k.stores[0];
  const KernelBuffer& out = k.buffers[store.buffer];
  const DType product_dtype = g.dtype;
  if (g.operand_dtype != product_dtype) return Unimplemented("cuBLASLt's FP8 products are not wired (the GEMM template takes them)");
  if (out.dtype != product_dtype)
    return Unimplemented(fmt::format("the output is {}, the product {} (the library writes the product's type)", DTypeName(out.dtype),
                                     DTypeName(product_dtype)));
  if (!AtProductPosition(g, store.index)) return Unimplemented("the output is not stored at the product's own position");
  if (!g.partner_loads.empty()) return Unimplemented("the epilogue reads the product at a second column (a rotated half)");
  LibraryEpilogue e;
  e.output = out.node;
  std::vector<Role> roles(k.values.size(), Role::kOther);
  for (size_t i = 0; i < k.values.size(); ++i) {
    const ScalarValue& s = k.values[i];
    if (s.kind == ScalarValue::Kind::kOp) {
      if (GetOpInfo(s.op).kind != OpKind::Pointwise) return Unimplemented(fmt::format("the epilogue computes {}", OpName(s.op)));
      if (s.op == OpCode::kCast && !IsFloat(s.dtype)) return Unimplemented("the epilogue casts to an integer type");
      continue;
    }
    if (s.kind == ScalarValue::Kind::kConstant) continue;
    if (s.kind != ScalarValue::Kind::kLoad) return Unimplemented("the epilogue reads indices, random numbers or reductions");
    const KernelBuffer& b = k.buffers[s.buffer];
    if (b.node == g.product && AtProductPosition(g, s.index)) {
      roles[i] = Role::kProduct;
    } else if (b.elements == g.n && AtColumn(s.index) && b.dtype == product_dtype && (e.bias < 0 || e.bias == b.node)) {
      roles[i] = Role::kBias;
      e.bias = b.node;
    } else {
      return Unimplemented(fmt::format("the epilogue reads %{} other than as a bias of the product's type per column", b.node));
    }
  }
  // Exact candidates first. A half-precision tanh GELU must spell a tanh: at that tolerance
  // ONNX's erf GELU would pass for it too (f32 programs tell them apart, and their tanh may
  // have been lowered as a sigmoid).
  const bool half = IsHalf(product_dtype);
  for (LibraryActivation activation : {LibraryActivation::kNone, LibraryActivation::kRelu, LibraryActivation::kGeluTanh}) {
    if (activation == LibraryActivation::kGeluTanh && half && !HasOp(k, OpCode::kTanh)) continue;
    if (!Computes(k, roles, store.value, activation, e.bias >= 0, half)) continue;
    e.activation = activation;
    return e;
  }
  return Unimplemented("the epilogue is none of a bias, ReLU or tanh GELU (or a bias and one of them)");
}

}  // namespace tilefuse
