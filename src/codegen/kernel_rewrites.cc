#include "codegen/kernel_rewrites.h"

#include <map>
#include <optional>

namespace tilefuse {

namespace {

// Copies the values in order into a new kernel, each with its arguments (and the
// gathered values in its index) renumbered, replacing the ones a rewrite applies to.
class Rewriter {
 public:
  Rewriter(const Kernel& kernel, const EmissionRewrites& rewrites)
      : in_(kernel), rewrites_(rewrites), new_id_(kernel.values.size(), -1), rounded_(ReadByRounding(kernel)) {}

  Kernel Run() {
    out_ = in_;
    out_.values.clear();
    for (size_t v = 0; v < in_.values.size(); ++v) new_id_[v] = Rewrite(Renumbered(in_.values[v]), rounded_[v]);
    for (KernelReduction& r : out_.reductions) r.value = new_id_[r.value];
    for (KernelStore& s : out_.stores) {
      s.value = new_id_[s.value];
      s.index = Renumbered(s.index);
      if (rewrites_.stored_casts) s.value = UncastForStore(s.value, out_.buffers[s.buffer].dtype);
    }
    return std::move(out_);
  }

  const std::vector<int>& new_ids() const { return new_id_; }

 private:
  ScalarValue Renumbered(ScalarValue v) const {
    for (int& a : v.args) a = new_id_[a];
    v.index = Renumbered(v.index);
    return v;
  }
  Index Renumbered(const Index& index) const {
    if (!index || !UsesValue(index)) return index;
    auto copy = std::make_shared<IndexExpr>(*index);
    if (copy->kind == IndexExpr::Kind::kValue) copy->value = new_id_[copy->value];
    copy->a = Renumbered(index->a);
    copy->b = Renumbered(index->b);
    return copy;
  }

  // What a store to a `stored` buffer of value `v` may store instead: cast(x) to that very
  // dtype stores x, for the floating types whose conversion from any value rounds it once
  // through float (f16, bf16, f32).
  int UncastForStore(int v, DType stored) const {
    const ScalarValue& value = out_.values[v];
    const bool rounds_through_float = stored == DType::kF16 || stored == DType::kBF16 || stored == DType::kF32;
    if (value.kind != ScalarValue::Kind::kOp || value.op != OpCode::kCast || value.dtype != stored || !rounds_through_float) return v;
    return value.args[0];
  }

  // The values a rounding reads: floor, ceil, a cast or store to an integer or an 8-bit
  // float. A one-ulp change moves them a whole step, so their divisions stay divisions (a
  // quantizer's round(x / scale) through a reciprocal gave 25 where the reference's 25.5 rounds
  // half to even to 26).
  static std::vector<bool> ReadByRounding(const Kernel& k) {
    std::vector<bool> read(k.values.size(), false);
    auto coarse = [](DType d) { return IsInteger(d) || IsFloat8(d); };
    for (const ScalarValue& v : k.values)
      if (v.kind == ScalarValue::Kind::kOp &&
          (v.op == OpCode::kFloor || v.op == OpCode::kCeil || (v.op == OpCode::kCast && coarse(v.dtype))))
        for (int a : v.args) read[a] = true;
    for (const KernelStore& s : k.stores)
      if (coarse(k.buffers[s.buffer].dtype)) read[s.value] = true;
    return read;
  }

  // `v` (arguments already renumbered) as one or more values of the result; its id there.
  // `rounded`: a rounding reads it (ReadByRounding).
  int Rewrite(ScalarValue v, bool rounded) {
    if (v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kPow && rewrites_.integer_powers)
      if (std::optional<int> product = IntegerPower(v)) return *product;
    if (v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kDiv && rewrites_.row_invariant_divisors && IsFloat(v.dtype) &&
        v.inner && !out_.values[v.args[1]].inner && !rounded)
      return Add(Op(OpCode::kMul, {v.args[0], Reciprocal(v.args[1], v.dtype)}, v.dtype));
    return Add(std::move(v));
  }

  std::optional<int> IntegerPower(const ScalarValue& v) {
    // By value: Add below may move out_.values.
    const ScalarValue exponent = out_.values[v.args[1]];
    if (!IsFloat(v.dtype) || exponent.kind != ScalarValue::Kind::kConstant || (exponent.constant != 2 && exponent.constant != 3))
      return std::nullopt;
    const int x = v.args[0];
    const int square = Add(Op(OpCode::kMul, {x, x}, v.dtype));
    return exponent.constant == 2 ? square : Add(Op(OpCode::kMul, {square, x}, v.dtype));
  }

  // One reciprocal per divisor, however many divisions share it.
  int Reciprocal(int divisor, DType dtype) {
    auto [it, added] = reciprocal_of_.try_emplace(divisor, -1);
    if (added) it->second = Add(Op(OpCode::kReciprocal, {divisor}, dtype));
    return it->second;
  }

  // An op value over result values, per element when an argument is (as lowering marks it).
  ScalarValue Op(OpCode op, std::vector<int> args, DType dtype) const {
    ScalarValue v;
    v.kind = ScalarValue::Kind::kOp;
    v.op = op;
    v.dtype = dtype;
    for (int a : args) v.inner = v.inner || out_.values[a].inner;
    v.args = std::move(args);
    return v;
  }
  int Add(ScalarValue v) {
    out_.values.push_back(std::move(v));
    return static_cast<int>(out_.values.size()) - 1;
  }

  const Kernel& in_;
  const EmissionRewrites rewrites_;
  Kernel out_;
  std::vector<int> new_id_;
  std::map<int, int> reciprocal_of_;  // result ids: divisor -> its reciprocal
  std::vector<bool> rounded_;         // input ids: read by a rounding
};

}  // namespace

Kernel RewriteForEmission(const Kernel& kernel, const EmissionRewrites& rewrites, std::vector<int>* new_ids) {
  Rewriter rewriter(kernel, rewrites);
  Kernel result = rewriter.Run();
  if (new_ids) *new_ids = rewriter.new_ids();
  return result;
}

}  // namespace tilefuse
