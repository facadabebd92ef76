/* SPDX-License-Identifier: MIT */
/*
 * range_set.h - a set of half-open uint64 ranges [start, end), kept sorted and
 * merged. The client keeps file block ranges in them (written, not committed).
 * Not thread-safe: the owner's lock protects it.
 */
#ifndef RDFS_RANGE_SET_H
#define RDFS_RANGE_SET_H

#include <stddef.h>
#include <stdint.h>

struct range {
	uint64_t start;
	uint64_t end;
};

struct range_set {
	struct range *r;
	size_t n;
	size_t cap;
};

void range_set_init(struct range_set *s);
void range_set_free(struct range_set *s);
void range_set_clear(struct range_set *s);
int range_set_add(struct range_set *s, uint64_t start, uint64_t end);
int range_set_remove(struct range_set *s, uint64_t start, uint64_t end);
/* Merge every range of @from into @s. */
int range_set_merge(struct range_set *s, const struct range_set *from);
/* 1 if every point of [start, end) is in @s. */
int range_set_contains(const struct range_set *s, uint64_t start, uint64_t end);
/* 1 if some point of [start, end) is in @s. */
int range_set_overlaps(const struct range_set *s, uint64_t start, uint64_t end);
/*
 * The first range of @s that intersects [start, end), clipped to it, in *@out.
 * Returns 1 if there is one, else 0. Walk with start = out->end.
 */
int range_set_next(const struct range_set *s, uint64_t start, uint64_t end, struct range *out);

#endif
