// Loading the CUDA libraries at run time. tilefuse never links libcuda, NVRTC or cuBLASLt:
// the same binary starts on a machine without them and reports what it looked for.
#pragma once

#include <string>
#include <vector>

#include "tilefuse/status.h"

namespace tilefuse {

// dlopen()s the first of `candidates` that loads (names go through the loader's search
// path; absolute paths are tried as they are). `env_var`, when set, is tried first.
// NotFound lists every candidate and the loader's last complaint.
StatusOr<void*> OpenFirstLibrary(const std::string& what, const std::string& env_var,
                                 const std::vector<std::string>& candidates);

// Candidate paths for a CUDA toolkit library `file` (say "libnvrtc.so.13"): the loader's
// own search, $CUDA_HOME/lib64, /usr/local/cuda/lib64, and the lib folders of the NVIDIA
// Python wheels (where PyTorch machines keep their CUDA libraries).
std::vector<std::string> CudaLibraryCandidates(const std::string& file);

}  // namespace tilefuse
