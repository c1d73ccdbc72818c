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

int PositiveSetting(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed > 0 && parsed < 1000 ? static_cast<int>(parsed) : 0;
}

}  // namespace tilefuse
