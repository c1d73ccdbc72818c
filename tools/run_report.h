// What `tilefuse run` found, and its two renderings: a human-readable summary and the
// machine-readable --json report.
//
// JSON layout:
//   {"model", "backend", "opset", "nodes_imported", "nodes_after_passes", "inputs",
//    "bound_inputs": [names of inputs bound as constants at import],
//    "check": "expected_outputs" | "reference_before_passes" | null,
//    "outputs": [{"name", "data_set", "dtype", "shape", "max_abs_err", "max_rel_err",
//                 "mismatches", "pass", "reason"}],
//    "kernels": [{"name", "kind", "generated", "why_not", "ms"}]  (cpu backend; first data set),
//    "num_kernels", "compile_ms", "jit_compiles", "run_ms", "backend_note",
//    "reference_ms", "status": "ok" | "pass" | "fail" | "error",
//    "error": {"code", "message"}  (only when status is "error")}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tilefuse/status.h"
#include "tilefuse/tensor.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {

struct OutputReport {
  std::string name;
  std::string data_set;  // e.g. "test_data_set_0"; empty for --inputs or random inputs
  DType dtype = DType::kF32;
  Shape shape;
  std::optional<OutputComparison> comparison;  // set with --check
  double min = 0, max = 0, mean = 0;     // over finite values, for the summary
  // A check against the reference that failed: how far legitimate computations of the
  // graph land from the reference, in units of the tolerance (reference/conditioning.h),
  // and by which probe; or why that was not measured (conditioning only).
  std::optional<double> sensitivity_ratio;
  std::string conditioning;
};

// One kernel of a compiled (cpu) run and its wall time in the first data set's run.
struct KernelReport {
  std::string name;
  std::string kind;
  bool generated = false;
  std::string why_not;
  double ms = 0;
};

struct RunReport {
  std::string model;
  std::string backend = "reference";
  int64_t opset = 0;
  int nodes_imported = 0;
  int nodes_after_passes = 0;
  std::string input_source;  // "random (seed 0)", a folder, or "test_data_set_*"
  std::vector<std::string> bound_inputs;  // inputs bound as constants at import
  std::string check_mode;    // "" without --check
  std::string check_rule;    // the comparison rule --check used, in words
  std::vector<OutputReport> outputs;
  double reference_ms = 0;   // the reference interpreter's time (reference backend)
  double run_ms = 0;         // execution time over all data sets, whichever backend
  std::string backend_note;  // e.g. why auto fell back to the reference interpreter
  std::vector<KernelReport> kernels;
  int num_kernels = 0;
  double compile_ms = 0;
  int64_t jit_compiles = 0;
  Status error;  // not ok: the run failed before producing a verdict

  bool AllPassed() const;
  std::string Verdict() const;  // "ok", "pass", "fail" or "error"
};

// Summary statistics of an output, for runs without --check.
void Summarize(const Tensor& output, OutputReport& report);

void PrintTextReport(const RunReport& report);
void PrintJsonReport(const RunReport& report);

}  // namespace tilefuse::cli
