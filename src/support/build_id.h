// The build id: a hash of tilefuse's sources (scripts/build_id.cmake), for keys of what tilefuse
// caches from its own analyses across processes, so that a build with other code never reads
// another build's answers.
#pragma once

#include <string_view>

namespace tilefuse {

std::string_view BuildId();  // 32 hex digits

}  // namespace tilefuse
