// The facade's Chrome trace of a profiled run (tilefuse/tilefuse.h: WriteKernelTrace), what
// `tilefuse run --trace` writes.
#include <algorithm>
#include <string>

#include "runtime/trace.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

Status WriteKernelTrace(const CompiledModel& model, const std::vector<KernelRunTime>& timings, const std::string& path) {
  TraceRecorder recorder;
  const bool cpu = model.backend() == "cpu";
  if (cpu) recorder.SetTrackName(0, "cpu kernels");
  for (const KernelRunTime& timing : timings) {
    TraceEvent event{timing.name, "kernel", timing.start_us, timing.duration_us, 0, {}};
    auto k = std::find_if(model.kernels().begin(), model.kernels().end(), [&](const KernelSummary& s) { return s.name == timing.name; });
    if (k != model.kernels().end() && cpu) {
      event.args.emplace_back("kind", k->kind);
      event.args.emplace_back("generated", k->generated ? "true" : "false");
      event.args.emplace_back("nodes", std::to_string(k->num_nodes));
      if (!k->generated) event.args.emplace_back("why_not", k->why_not);
    } else if (k != model.kernels().end()) {
      event.args = {{"kind", k->kind}, {"mode", k->mode}, {"strategy", k->strategy}};
    }
    recorder.Add(std::move(event));
  }
  return WriteChromeTrace(recorder, path);
}

}  // namespace tilefuse
