#include "support/build_id.h"

#include "support/build_id_generated.h"

namespace tilefuse {

std::string_view BuildId() { return kTilefuseBuildId; }

}  // namespace tilefuse
