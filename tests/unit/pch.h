// SPDX-License-Identifier: MIT
// What nearly every unit test includes, compiled once per build directory
// (Makefile: $(BUILD)/pch/unit.h.gch) and put in front of each test by
// -include. googletest's headers are most of a test file's compile time;
// they are parsed three times per `make test` (plain, ASan, TSan builds).
// Only system headers here: a project header in it would hide a test's
// missing #include.
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
