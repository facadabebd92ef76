// SPDX-License-Identifier: MIT
/*
 * pattern.c - the test file's bytes: each 8-byte word is a function of its file
 * offset, so any read can be checked without keeping a copy, and a unit sent
 * out of order, twice, or not at all (zeros) shows as a wrong word.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sweep.h"

static inline uint64_t pattern_word(uint64_t off, uint64_t seed)
{
	/* odd multiplier: distinct offsets give distinct words; never all zeros */
	return ((off | 1) * 0x9e3779b97f4a7c15ull) ^ seed;
}

/* @file_offset and @len are multiples of 8 here (requests are whole blocks). */
void pattern_fill(void *buf, size_t len, uint64_t file_offset, uint64_t seed)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = pattern_word(file_offset + i * 8, seed);
}

int pattern_check(const void *buf, size_t len, uint64_t file_offset, uint64_t seed,
		  const char *what)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		uint64_t want = pattern_word(file_offset + i * 8, seed);

		if (w[i] != want) {
			fprintf(stderr,
				"rdfs-sweep: DATA MISMATCH (%s): file offset %llu (byte %zu of a "
				"%zu-byte read at %llu): got %016llx, expected %016llx\n",
				what, (unsigned long long)(file_offset + i * 8), i * 8, len,
				(unsigned long long)file_offset, (unsigned long long)w[i],
				(unsigned long long)want);
			return -EILSEQ;
		}
	}
	return 0;
}
