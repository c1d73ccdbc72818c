#include "runtime/measure.h"

#include <algorithm>

namespace tilefuse {

double MedianOf(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

StatusOr<std::vector<double>> GroupTimesUs(Executable& executable, const std::vector<Tensor>& inputs) {
  constexpr int kRuns = 7;
  std::vector<std::vector<double>> samples(executable.plan().groups.size());
  for (int run = 0; run < kRuns; ++run) {
    std::vector<KernelTiming> timings;
    ASSIGN_OR_RETURN(std::vector<Tensor> unused, executable.Run(inputs, &timings));
    if (run == 0) continue;
    for (size_t g = 0; g < timings.size() && g < samples.size(); ++g) samples[g].push_back(timings[g].duration_us);
  }
  std::vector<double> out;
  for (std::vector<double>& v : samples) out.push_back(MedianOf(std::move(v)));
  return out;
}

}  // namespace tilefuse
