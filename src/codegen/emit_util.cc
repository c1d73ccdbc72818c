#include "codegen/emit_util.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>

#include "ir/reduction_traits.h"

namespace tilefuse {

const char* StorageType(DType d) {
  switch (d) {
    case DType::kF64: return "double";
    case DType::kF32: return "float";
    case DType::kF16: case DType::kBF16: return "uint16_t";
    case DType::kI64: return "int64_t";
    case DType::kI32: return "int32_t";
    case DType::kI8: return "int8_t";
    case DType::kU8: case DType::kBool: case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz:
    case DType::kF8E5M2Fnuz: return "uint8_t";
  }
  return "void";
}

const char* ComputeType(DType d) {
  if (d == DType::kF64) return "double";
  if (IsInteger(d)) return "int64_t";
  return "float";
}

std::string Literal(double v, DType d) {
  if (std::isnan(v)) return fmt::format("{}(NAN)", ComputeType(d));
  if (std::isinf(v)) return fmt::format("{}({}INFINITY)", ComputeType(d), v < 0 ? "-" : "");
  if (IsInteger(d)) return fmt::format("int64_t({})", static_cast<int64_t>(v));
  return fmt::format("{}({:.17g})", ComputeType(d), v);
}

std::string ReductionIdentity(const KernelReduction& r) {
  const double identity = GetReductionTraits(r.op).identity;
  if (!std::isinf(identity)) return fmt::format("{}", identity);
  // The int64_t extremes spelled without <limits> (NVRTC has no standard headers).
  if (IsInteger(r.dtype)) return identity < 0 ? "(int64_t)(-9223372036854775807LL - 1)" : "(int64_t)9223372036854775807LL";
  return identity < 0 ? "-INFINITY" : "INFINITY";
}

std::string CppBufferDeclarations(const std::vector<KernelBuffer>& buffers, bool sizes) {
  std::string out;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const KernelBuffer& buf = buffers[b];
    out += fmt::format("  {0}{1}* __restrict__ b{2} = static_cast<{0}{1}*>(buffers[{2}]);  // %{3} {4}{5}\n",
                       buf.is_output ? "" : "const ", StorageType(buf.dtype), b, buf.node, DTypeName(buf.dtype),
                       sizes ? fmt::format("[{}]", buf.elements) : "");
  }
  return out;
}

std::string SubstituteArgs(std::string_view expr, const std::vector<std::string>& args) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::string out;
  for (size_t i = 0; i < expr.size(); ++i) {
    char c = expr[i];
    bool starts = i == 0 || !is_word(expr[i - 1]);
    bool ends = i + 1 == expr.size() || !is_word(expr[i + 1]);
    if (starts && ends && c >= 'a' && c <= 'c' && static_cast<size_t>(c - 'a') < args.size()) out += args[c - 'a'];
    else out += c;
  }
  return out;
}

}  // namespace tilefuse
