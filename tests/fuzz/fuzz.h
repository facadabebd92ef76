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

/*
 * The dispatch targets' inputs: up to @max records of an opcode (1 byte), a
 * byte the target reads as it likes, a body length (2 bytes, little-endian)
 * and the body, the last one's body whatever is left when fewer bytes remain.
 * Calls @fn with each.
 */
static inline void fuzz_records(const uint8_t *data, size_t size, int max,
				void (*fn)(uint8_t op, uint8_t how, const uint8_t *body,
					   size_t len))
{
	size_t pos = 0;

	for (int i = 0; i < max && size - pos >= 2; i++) {
		size_t left = size - pos - 2, len = 0;

		if (left >= 2) {
			len = data[pos + 2] | (size_t)data[pos + 3] << 8;
			left -= 2;
			if (len > left)
				len = left;
			fn(data[pos], data[pos + 1], data + pos + 4, len);
			pos += 4 + len;
		} else {
			fn(data[pos], data[pos + 1], NULL, 0);
			pos += 2 + left;
		}
	}
}

#endif
