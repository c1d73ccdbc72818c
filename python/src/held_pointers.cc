// tilefuse._tilefuse.HeldDevicePointers: a caller's device pointers for CompiledModel.run_device,
// kept from call to call. A caller whose pointers mostly stay put (a decode step's ~185 weights
// and KV cache tensors, of which only the token's, the position's and the logits' move) sends
// the entries that moved, not two lists of every pointer converted again at each call.
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::python {
namespace {

struct HeldDevicePointers {
  std::vector<uint64_t> inputs, outputs;
};

}  // namespace

void BindHeldDevicePointers(nb::module_& m) {
  nb::class_<HeldDevicePointers>(m, "HeldDevicePointers",
                                 "Device pointers for CompiledModel.run_device (graph order), kept between calls")
      .def(nb::init<std::vector<uint64_t>, std::vector<uint64_t>>(), nb::arg("inputs"), nb::arg("outputs"))
      .def_ro("inputs", &HeldDevicePointers::inputs)
      .def_ro("outputs", &HeldDevicePointers::outputs)
      .def(
          "run",
          [](HeldDevicePointers& held, CompiledModel& model, const std::vector<int64_t>& entries,
             const std::vector<uint64_t>& pointers, uint64_t stream) {
            if (entries.size() != pointers.size())
              throw nb::value_error(fmt::format("HeldDevicePointers.run: {} entries and {} pointers", entries.size(), pointers.size()).c_str());
            const int64_t inputs = static_cast<int64_t>(held.inputs.size());
            const int64_t total = inputs + static_cast<int64_t>(held.outputs.size());
            for (size_t i = 0; i < entries.size(); ++i) {
              const int64_t e = entries[i];
              if (e < 0 || e >= total)
                throw nb::index_error(fmt::format("HeldDevicePointers.run: entry {} of {} inputs and outputs", e, total).c_str());
              (e < inputs ? held.inputs[e] : held.outputs[e - inputs]) = pointers[i];
            }
            const Status ran = model.RunOnDevice(held.inputs, held.outputs, stream);
            if (!ran.ok()) ValueOrThrow(StatusOr<int>(ran));
          },
          nb::arg("model"), nb::arg("entries"), nb::arg("pointers"), nb::arg("stream"),
          "Sets each entry (an input's position, or the inputs' count plus an output's) to its pointer, then queues "
          "model.run_device on all of them on the stream");
}

}  // namespace tilefuse::python
