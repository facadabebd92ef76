/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what every libFuzzer target of tests/fuzz shares. A target is one
 * file, fuzz_NAME.c, with LLVMFuzzerTestOneInput(); `make fuzz` builds them
 * with clang (-fsanitize=fuzzer,address,undefined) into build-fuzz/fuzz/ and
 * runs each on its seed corpus (tests/fuzz/corpus/NAME/) and regression
 * inputs (tests/fuzz/regressions/NAME/). A finding is an ASan/UBSan report or
 * a FUZZ_CHECK that failed: the input that did it is kept as a regression.
 */
#ifndef RDFS_FUZZ_H
#define RDFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test: a violation is a finding, like a crash. */
#define FUZZ_CHECK(cond)							\
	do {									\
		if (!(cond)) {							\
			fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #cond);			\
			abort();						\
		}								\
	} while (0)

#endif
