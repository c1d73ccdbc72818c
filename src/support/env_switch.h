// Environment switches for measurements: TILEFUSE_COLUMN=0, TILEFUSE_ONEDNN_CONV_CHAIN=0 and
// the like keep one mechanism off, for comparison and diagnosis.
#pragma once

namespace tilefuse {

// Whether the environment variable `name` is set to "0".
bool SwitchedOff(const char* name);
// Whether it is set to "1" (a mechanism the rules leave off, turned on for measurement).
bool SwitchedOn(const char* name);
// Its value as a positive integer (a rule's limit moved for measurement), or 0 where it is
// unset or not one.
int PositiveSetting(const char* name);

}  // namespace tilefuse
