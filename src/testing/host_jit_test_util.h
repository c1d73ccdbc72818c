// Generated device code written for the host (its few device helpers defined by the test)
// compiled into a loaded library, for tests that run a kernel's source on the CPU.
#pragma once

#include <memory>
#include <string_view>

#include "backend/cpu/host_jit.h"
#include "tilefuse/status.h"

namespace tilefuse {

inline StatusOr<std::shared_ptr<const JitLibrary>> CompileForHost(std::string_view source) {
  HostJitOptions options;
  options.flags = {"-O1", "-shared", "-fPIC", "-std=c++17"};
  ASSIGN_OR_RETURN(HostJit jit, HostJit::Create(options));
  return jit.Compile(source);
}

}  // namespace tilefuse
