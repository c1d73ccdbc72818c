// A fixture for the layering check's own test: the module the wrong include names.
#pragma once
