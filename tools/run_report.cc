#include "run_report.h"

#include <cmath>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {

bool RunReport::AllPassed() const {
  for (const OutputReport& output : outputs) {
    if (output.comparison && !output.comparison->pass) return false;
  }
  return true;
}

std::string RunReport::Verdict() const {
  if (!error.ok()) return "error";
  if (check_mode.empty()) return "ok";
  return AllPassed() ? "pass" : "fail";
}

void Summarize(const Tensor& output, OutputReport& report) {
  double sum = 0;
  int64_t finite = 0;
  report.min = INFINITY;
  report.max = -INFINITY;
  for (int64_t i = 0; i < output.num_elements(); ++i) {
    double v = output.GetDouble(i);
    if (!std::isfinite(v)) continue;
    report.min = std::min(report.min, v);
    report.max = std::max(report.max, v);
    sum += v;
    ++finite;
  }
  if (finite == 0) report.min = report.max = 0;
  report.mean = finite ? sum / static_cast<double>(finite) : 0;
}

namespace {

std::string OutputLabel(const OutputReport& output) {
  std::string label = fmt::format("'{}'", output.name);
  if (!output.data_set.empty()) label += fmt::format(" [{}]", output.data_set);
  return label;
}

nlohmann::json OutputToJson(const OutputReport& output) {
  nlohmann::json j = {{"name", output.name},
                      {"data_set", output.data_set},
                      {"dtype", std::string(DTypeName(output.dtype))},
                      {"shape", output.shape}};
  if (output.comparison) {
    const OutputComparison& c = *output.comparison;
    j["max_abs_err"] = c.max_abs_err;
    j["max_rel_err"] = c.max_rel_err;
    j["mismatches"] = c.mismatches;
    j["pass"] = c.pass;
    j["reason"] = c.reason;
    if (c.worst_index >= 0) j["worst"] = {{"index", c.worst_index}, {"actual", c.worst_actual}, {"expected", c.worst_expected}};
    if (!output.conditioning.empty()) j["conditioning"] = output.conditioning;
    if (output.sensitivity_ratio) {
      j["sensitivity_ratio"] = *output.sensitivity_ratio;
      j["explained_by_conditioning"] = ConditioningExplainsFailure(c.worst_ratio, *output.sensitivity_ratio);
    }
  } else {
    j["min"] = output.min;
    j["max"] = output.max;
    j["mean"] = output.mean;
  }
  return j;
}

}  // namespace

void PrintTextReport(const RunReport& report) {
  fmt::print("model: {} (opset {})\n", report.model, report.opset);
  fmt::print("graph: {} nodes imported, {} after passes; backend: {}\n", report.nodes_imported,
             report.nodes_after_passes, report.backend);
  fmt::print("inputs: {}\n", report.input_source);
  if (!report.bound_inputs.empty()) {
    fmt::print("bound as constants at import: {}\n", fmt::join(report.bound_inputs, ", "));
  }
  if (report.check_mode == "expected_outputs") {
    fmt::print("check: against the expected outputs, {}\n", report.check_rule);
  } else if (!report.check_mode.empty()) {
    fmt::print("check: no expected outputs; against {} on the graph before passes\n", report.check_rule);
  }
  for (const OutputReport& output : report.outputs) {
    std::string type = DescribeTensorType(output.dtype, output.shape);
    if (!output.comparison) {
      fmt::print("  output {} {}: min {:.6g} max {:.6g} mean {:.6g}\n", OutputLabel(output), type, output.min,
                 output.max, output.mean);
      continue;
    }
    const OutputComparison& c = *output.comparison;
    fmt::print("  output {} {}: max_abs_err {:.3g} max_rel_err {:.3g} {}\n", OutputLabel(output), type,
               c.max_abs_err, c.max_rel_err, c.pass ? "PASS" : "FAIL");
    if (c.worst_index >= 0)
      fmt::print("    worst element {}: {:.9g} where {:.9g} is expected\n", c.worst_index, c.worst_actual, c.worst_expected);
    if (!c.pass) fmt::print("    {}\n", c.reason);
    if (output.sensitivity_ratio) {
      fmt::print("    conditioning: the reference itself, rounded and summed as other correct kernels may, moves by up to "
                 "{:.3g}x the tolerance ({})\n",
                 *output.sensitivity_ratio, output.conditioning);
      fmt::print("    {}\n", ConditioningExplainsFailure(c.worst_ratio, *output.sensitivity_ratio)
                                 ? "so this check cannot tell a correct kernel from a wrong one here (ill-conditioned for its tolerance)"
                                 : "so rounding does not explain the difference (a well-conditioned mismatch)");
    } else if (!output.conditioning.empty()) {
      fmt::print("    conditioning {}\n", output.conditioning);
    }
  }
  if (!report.backend_note.empty()) fmt::print("note: {}\n", report.backend_note);
  if (report.backend == "cpu") {
    fmt::print("cpu: {} kernels, compiled in {:.1f} ms ({} host compiles, the rest from the cache)\n",
               report.num_kernels, report.compile_ms, report.jit_compiles);
    for (const KernelReport& k : report.kernels) {
      fmt::print("  kernel {:<28} {:<14} {:>9.3f} ms  {}\n", k.name, k.kind, k.ms,
                 k.generated ? "generated" : "reference: " + k.why_not);
    }
    fmt::print("run time: {:.2f} ms\n", report.run_ms);
  } else {
    fmt::print("reference time: {:.2f} ms\n", report.reference_ms);
  }
  if (!report.check_mode.empty()) fmt::print("result: {}\n", report.AllPassed() ? "PASS" : "FAIL");
}

void PrintJsonReport(const RunReport& report) {
  nlohmann::json j = {{"model", report.model},
                      {"backend", report.backend},
                      {"opset", report.opset},
                      {"nodes_imported", report.nodes_imported},
                      {"nodes_after_passes", report.nodes_after_passes},
                      {"inputs", report.input_source},
                      {"bound_inputs", report.bound_inputs},
                      {"reference_ms", report.reference_ms},
                      {"status", report.Verdict()}};
  j["check"] = report.check_mode.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.check_mode);
  j["run_ms"] = report.run_ms;
  j["backend_note"] = report.backend_note;
  j["num_kernels"] = report.num_kernels;
  j["compile_ms"] = report.compile_ms;
  j["jit_compiles"] = report.jit_compiles;
  j["kernels"] = nlohmann::json::array();
  for (const KernelReport& k : report.kernels) {
    j["kernels"].push_back(
        {{"name", k.name}, {"kind", k.kind}, {"generated", k.generated}, {"why_not", k.why_not}, {"ms", k.ms}});
  }
  j["outputs"] = nlohmann::json::array();
  for (const OutputReport& output : report.outputs) j["outputs"].push_back(OutputToJson(output));
  if (!report.error.ok()) {
    j["error"] = {{"code", StatusCodeName(report.error.code())}, {"message", report.error.message()}};
  }
  std::cout << j.dump(2) << "\n";
}

}  // namespace tilefuse::cli
