// The helper library every generated C++ kernel starts with: the scalar semantics of
// ops.def (the text of src/ir/scalar_library.h), loads/stores/casts per dtype, and the
// Philox generator of src/support/philox.h.
#pragma once

#include <string>

namespace tilefuse {

const std::string& CppPrelude();

}  // namespace tilefuse
