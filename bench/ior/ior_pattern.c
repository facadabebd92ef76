// SPDX-License-Identifier: MIT
/*
 * ior_pattern.c - the data every task writes: each 8-byte word is a hash of its
 * file offset and of the writing task, so a block that lands at the wrong
 * offset, in the wrong file, or from the wrong task fails verification, and
 * holes or stale data (which read as zeros or old words) do too.
 */
#include <string.h>

#include "ior.h"

/* splitmix64's finalizer: cheap, and every input bit moves every output bit. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t pattern_word(uint64_t word_offset, int writer)
{
	return mix64(word_offset * 0x9e3779b97f4a7c15ull + ((uint64_t)writer + 1) * 0xd6e8feb86659fd93ull);
}

/* Byte @i of the word at 8-aligned @word_offset, little-endian on every host. */
static uint8_t pattern_byte(uint64_t byte_offset, int writer)
{
	uint64_t w = pattern_word(byte_offset & ~7ull, writer);

	return (uint8_t)(w >> (8 * (byte_offset & 7)));
}

void ior_pattern_fill(void *buf, size_t len, uint64_t file_offset, int writer)
{
	uint8_t *b = buf;
	size_t i = 0;

	/* Leading bytes up to a word boundary of the file, then whole words. */
	while (i < len && ((file_offset + i) & 7))
		b[i] = pattern_byte(file_offset + i, writer), i++;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pattern_word(file_offset + i, writer);
		int j;

		for (j = 0; j < 8; j++)
			b[i + j] = (uint8_t)(w >> (8 * j));
	}
	for (; i < len; i++)
		b[i] = pattern_byte(file_offset + i, writer);
}

long ior_pattern_check(const void *buf, size_t len, uint64_t file_offset, int writer,
		       uint8_t *expected)
{
	const uint8_t *b = buf;
	uint8_t chunk[8192];
	size_t done = 0;

	while (done < len) {
		size_t n = len - done < sizeof(chunk) ? len - done : sizeof(chunk);
		size_t i;

		ior_pattern_fill(chunk, n, file_offset + done, writer);
		if (memcmp(chunk, b + done, n) != 0) {
			for (i = 0; i < n; i++) {
				if (chunk[i] != b[done + i]) {
					*expected = chunk[i];
					return (long)(done + i);
				}
			}
		}
		done += n;
	}
	return -1;
}
