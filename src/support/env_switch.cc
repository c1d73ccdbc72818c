#include "support/env_switch.h"

#include <cstdlib>
#include <cstring>

namespace tilefuse {

bool SwitchedOff(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "0") == 0;
}

bool SwitchedOn(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace tilefuse
