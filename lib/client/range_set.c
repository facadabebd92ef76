// SPDX-License-Identifier: MIT
/*
 * range_set.c - sorted, merged sets of half-open ranges (see range_set.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "range_set.h"

void range_set_init(struct range_set *s)
{
	memset(s, 0, sizeof(*s));
}

void range_set_free(struct range_set *s)
{
	free(s->r);
	range_set_init(s);
}

void range_set_clear(struct range_set *s)
{
	s->n = 0;
}

static int range_set_reserve(struct range_set *s, size_t n)
{
	struct range *r;
	size_t cap;

	if (n <= s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 8;
	while (cap < n)
		cap *= 2;
	r = realloc(s->r, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	s->r = r;
	s->cap = cap;
	return 0;
}

/* Index of the first range whose end is >= @x (ranges touching x merge with it). */
static size_t range_set_first_touching(const struct range_set *s, uint64_t x)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->r[mid].end < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int range_set_add(struct range_set *s, uint64_t start, uint64_t end)
{
	size_t i, j;
	int ret;

	if (start >= end)
		return 0;
	i = range_set_first_touching(s, start);
	j = i;
	while (j < s->n && s->r[j].start <= end) {
		if (s->r[j].start < start)
			start = s->r[j].start;
		if (s->r[j].end > end)
			end = s->r[j].end;
		j++;
	}
	if (j == i) {
		ret = range_set_reserve(s, s->n + 1);
		if (ret)
			return ret;
		memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(s->r[0]));
		s->n++;
	} else if (j > i + 1) {
		memmove(&s->r[i + 1], &s->r[j], (s->n - j) * sizeof(s->r[0]));
		s->n -= j - i - 1;
	}
	s->r[i].start = start;
	s->r[i].end = end;
	return 0;
}

int range_set_remove(struct range_set *s, uint64_t start, uint64_t end)
{
	size_t i;
	int ret;

	if (start >= end)
		return 0;
	i = range_set_first_touching(s, start);
	while (i < s->n && s->r[i].start < end) {
		struct range *r = &s->r[i];

		if (r->end <= start) {
			i++;
			continue;
		}
		if (r->start < start && r->end > end) {
			/* split in two */
			ret = range_set_reserve(s, s->n + 1);
			if (ret)
				return ret;
			r = &s->r[i];
			memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(s->r[0]));
			s->n++;
			s->r[i].end = start;
			s->r[i + 1].start = end;
			return 0;
		}
		if (r->start < start) {
			r->end = start;
			i++;
		} else if (r->end > end) {
			r->start = end;
			i++;
		} else {
			memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof(s->r[0]));
			s->n--;
		}
	}
	return 0;
}

int range_set_merge(struct range_set *s, const struct range_set *from)
{
	size_t i;
	int ret;

	for (i = 0; i < from->n; i++) {
		ret = range_set_add(s, from->r[i].start, from->r[i].end);
		if (ret)
			return ret;
	}
	return 0;
}

int range_set_contains(const struct range_set *s, uint64_t start, uint64_t end)
{
	size_t i;

	if (start >= end)
		return 1;
	i = range_set_first_touching(s, start + 1);
	return i < s->n && s->r[i].start <= start && s->r[i].end >= end;
}

int range_set_overlaps(const struct range_set *s, uint64_t start, uint64_t end)
{
	struct range r;

	return range_set_next(s, start, end, &r);
}

int range_set_next(const struct range_set *s, uint64_t start, uint64_t end, struct range *out)
{
	size_t i;

	if (start >= end)
		return 0;
	i = range_set_first_touching(s, start + 1);
	if (i >= s->n || s->r[i].start >= end)
		return 0;
	out->start = s->r[i].start > start ? s->r[i].start : start;
	out->end = s->r[i].end < end ? s->r[i].end : end;
	return 1;
}
