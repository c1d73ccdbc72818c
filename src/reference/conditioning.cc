#include "reference/conditioning.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "reference/interpreter.h"

namespace tilefuse {

namespace {

// The inputs moved by up to 4 ulps of the compute precision, a different move per element
// (sign and size vary) so that rounding noise the elements share does not cancel out: a
// backward-stable kernel computes the exact result of inputs this close to the real ones.
std::vector<Tensor> Nudged(const std::vector<Tensor>& inputs, DType compute, uint64_t salt) {
  const double ulp = compute == DType::kF64 ? 0x1p-52 : 0x1p-23;
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor n(t.dtype(), t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const double steps = static_cast<double>(static_cast<int64_t>(((i + salt) * 2654435761u) % 9) - 4);
      n.SetDouble(i, t.GetDouble(i) * (1 + steps * ulp));
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace

DType ComputePrecision(const Graph& graph) {
  for (const Node& n : graph.nodes())
    if (IsFloat(n.dtype) && n.dtype != DType::kF64) return DType::kF32;
  return DType::kF64;
}

StatusOr<Sensitivity> MeasureSensitivity(const Graph& graph, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                                         DType compute, const ToleranceRatio& ratio) {
  using Probe = std::function<StatusOr<std::vector<Tensor>>()>;
  Status failed = Status::Ok();
  // Per output, the worst of one kind of probe.
  auto worst_of = [&](const std::vector<Probe>& probes) {
    std::vector<double> worst(expected.size(), 0);
    for (const Probe& probe : probes) {
      if (!failed.ok()) break;
      StatusOr<std::vector<Tensor>> got = probe();
      if (!got.ok()) {
        failed = got.status();
        break;
      }
      for (size_t o = 0; o < worst.size(); ++o) worst[o] = std::max(worst[o], ratio(o, (*got)[o], expected[o]));
    }
    return worst;
  };
  auto nudged = [&](uint64_t salt) -> Probe { return [&, salt] { return RunReference(graph, Nudged(inputs, compute, salt)); }; };
  auto rounded = [&](int ulps, uint64_t seed) -> Probe {
    return [&, ulps, seed] { return RunReference(graph, inputs, ReferenceRounding{ulps, seed}); };
  };
  const std::vector<double> by_inputs = worst_of({nudged(0), nudged(5)});
  const std::vector<double> by_one_ulp = worst_of({rounded(1, 1), rounded(1, 2), rounded(1, 3)});
  const std::vector<double> by_two_ulps = worst_of({rounded(2, 1), rounded(2, 2), rounded(2, 3)});
  const std::vector<double> by_accumulation = worst_of({[&] { return RunReference(graph, inputs, ReferenceRounding{0, 0, true}); }});
  if (!failed.ok()) return failed;
  Sensitivity result;
  for (size_t o = 0; o < expected.size(); ++o) {
    result.ratios.push_back(std::max({by_inputs[o], by_one_ulp[o], by_two_ulps[o], by_accumulation[o]}));
    result.summaries.push_back(fmt::format(
        "inputs moved by up to 4 {} ulps: {:.3g}x, every rounded intermediate by up to 1 ulp: {:.3g}x, by up to 2 ulps: "
        "{:.3g}x, sums and products accumulated in their dtype in order: {:.3g}x",
        DTypeName(compute), by_inputs[o], by_one_ulp[o], by_two_ulps[o], by_accumulation[o]));
  }
  return result;
}

}  // namespace tilefuse
