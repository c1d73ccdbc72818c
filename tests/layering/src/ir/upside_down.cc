// A fixture for the layering check's own test (CMakeLists.txt): ir may not include the driver.
#include "driver/driver.h"
