// SPDX-License-Identifier: MIT
/*
 * walk.c - where a pass's next request goes: forward through the file's runs of
 * contiguous volume blocks, never straddling two (one READ names one range).
 */
#include <stdio.h>

#include "sweep.h"

void walk_init(struct sweep_walk *w, const struct sweep_target *t, uint64_t start, uint64_t end)
{
	w->t = t;
	w->run = 0;
	w->pos = start;
	w->end = end < t->size ? end : t->size;
	while (w->run < t->nruns &&
	       t->runs[w->run].file_offset + t->runs[w->run].length <= w->pos)
		w->run++;
}

/* The walk ran out: say whether the file is too small or too fragmented. */
static void walk_explain(const struct sweep_walk *w, uint64_t len)
{
	const struct sweep_target *t = w->t;
	size_t i;

	for (i = 0; i < t->nruns; i++)
		if (t->runs[i].length >= len)
			break;
	if (i == t->nruns)
		fprintf(stderr, "rdfs-sweep: no extent of the test file holds %llu contiguous "
			"bytes (a fragmented volume: use a fresh cluster)\n",
			(unsigned long long)len);
	else
		fprintf(stderr, "rdfs-sweep: the test file is too small for this pass (run "
			"prepare with more --passes and the same sizes)\n");
}

const struct sweep_run *walk_next(struct sweep_walk *w, uint64_t len, uint64_t *file_offset)
{
	const struct sweep_target *t = w->t;

	for (; w->run < t->nruns; w->run++) {
		const struct sweep_run *r = &t->runs[w->run];

		if (w->pos < r->file_offset)
			w->pos = r->file_offset;
		if (w->pos + len > w->end)
			break;
		if (w->pos + len <= r->file_offset + r->length) {
			*file_offset = w->pos;
			w->pos += len;
			return r;
		}
	}
	walk_explain(w, len);
	return NULL;
}
