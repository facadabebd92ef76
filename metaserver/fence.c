// SPDX-License-Identifier: MIT
/*
 * fence.c - taking blocks back from clients (docs/DESIGN.md, "Taking blocks
 * back"): layout generations and the fence that has to be acknowledged before
 * a file's freed blocks may go to another file.
 *
 * A capability names its file and the file's layout generation. Generations
 * live in memory only: a restart gives every I/O server a new registration
 * epoch, which fences every capability issued before it, so a generation
 * needs to outlive neither the process nor the file. The table holds the
 * files fenced in this run (the others are at generation 0).
 *
 * Locks: the caller holds the file's inode lock across fence_and_free(), so
 * no LAYOUT of the file can hand out the old generation meanwhile; gens.mu is
 * held only to read or bump one entry; the fencer runs with no other lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ms_int.h"

void gens_init(struct ms_gens *g)
{
	pthread_mutex_init(&g->mu, NULL);
	memset(g->bucket, 0, sizeof(g->bucket));
}

void gens_destroy(struct ms_gens *g)
{
	for (int i = 0; i < MS_GEN_BUCKETS; i++)
		while (g->bucket[i]) {
			struct ms_gen *e = g->bucket[i];

			g->bucket[i] = e->next;
			free(e);
		}
	pthread_mutex_destroy(&g->mu);
}

static struct ms_gen **gen_slot(struct ms_gens *g, uint64_t ino)
{
	struct ms_gen **p = &g->bucket[(ino * 0x9e3779b97f4a7c15ull) >> 52];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

uint32_t ms_file_gen(struct ms *ms, uint64_t ino)
{
	struct ms_gen *e;
	uint32_t gen;

	pthread_mutex_lock(&ms->gens.mu);
	e = *gen_slot(&ms->gens, ino);
	gen = e ? e->gen : 0;
	pthread_mutex_unlock(&ms->gens.mu);
	return gen;
}

/* Move @ino to its next generation; returns it (0 when out of memory: no fence). */
static uint32_t gen_bump(struct ms *ms, uint64_t ino)
{
	struct ms_gen **p, *e;
	uint32_t gen = 0;

	pthread_mutex_lock(&ms->gens.mu);
	p = gen_slot(&ms->gens, ino);
	e = *p;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->ino = ino;
			*p = e;
		}
	}
	if (e)
		gen = ++e->gen;
	pthread_mutex_unlock(&ms->gens.mu);
	return gen;
}

void gens_forget(struct ms *ms, uint64_t ino)
{
	struct ms_gen **p, *e;

	pthread_mutex_lock(&ms->gens.mu);
	p = gen_slot(&ms->gens, ino);
	e = *p;
	if (e)
		*p = e->next;
	pthread_mutex_unlock(&ms->gens.mu);
	free(e);
}

void ms_set_fencer(struct ms *ms, ms_fence_fn fn, void *arg)
{
	/* what waits for a fence gets it from the fencer it was queued under */
	if (!fn)
		ms_set_freeing_async(ms, 0);
	ms->fence = fn;
	ms->fence_arg = arg;
}

/* The up servers among @e's (all up servers when @e is NULL), each once. */
static size_t fence_targets(struct ms *ms, const struct ms_ext *e, size_t n, uint32_t *out)
{
	size_t k = 0;

	if (!e)
		return (size_t)registry_up_ids(&ms->reg, out, FENCE_MAX_SERVERS);
	for (size_t i = 0; i < n; i++) {
		size_t j;

		for (j = 0; j < k && out[j] != e[i].server_id; j++)
			;
		/* a server that is down gets a new epoch before it serves again */
		if (j == k && k < FENCE_MAX_SERVERS && registry_is_up(&ms->reg, e[i].server_id))
			out[k++] = e[i].server_id;
	}
	return k;
}

/*
 * Move @ino to a new generation and tell the up servers of @e (every up server
 * when @e is NULL); @status and @servers get what the fencer said. Returns the
 * number of servers told, or -ENOMEM when the generation could not move (then
 * nothing may be freed).
 */
static int fence_send(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n,
		      uint32_t *servers, int *status, uint32_t *gen)
{
	size_t ns;

	if (!ms->fence)
		return 0;
	ns = fence_targets(ms, e, n, servers);
	*gen = gen_bump(ms, ino);
	if (!*gen)
		return -ENOMEM;
	if (ns)
		ms->fence(ms->fence_arg, servers, ns, ino, *gen, status);
	for (size_t j = 0; j < ns; j++)
		if (status[j])
			log_warn(1100001,
				 "ino=%llu: I/O server %u did not take the fence of generation "
				 "%u (%s); its blocks wait until it registers again",
				 (unsigned long long)ino, servers[j], *gen, strerror(-status[j]));
	return (int)ns;
}

void fence_file(struct ms *ms, uint64_t ino)
{
	uint32_t servers[FENCE_MAX_SERVERS], gen;
	int status[FENCE_MAX_SERVERS] = { 0 };

	if (fence_send(ms, ino, NULL, 0, servers, status, &gen) < 0)
		log_error(1100002,
			  "ino=%llu: out of memory for its fence; capabilities granted before "
			  "a change of its permissions stay valid until they expire",
			  (unsigned long long)ino);
}

void fence_only(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n,
		struct fence_result *r)
{
	uint32_t gen = 0;

	memset(r->status, 0, sizeof(r->status));
	r->ns = fence_send(ms, ino, e, n, r->servers, r->status, &gen);
	r->capped = r->ns == FENCE_MAX_SERVERS;
}

void fence_free(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n,
		const struct fence_result *r)
{
	if (r->ns < 0) {
		/* never hand out blocks a capability of the old generation reaches */
		log_error(1100003,
			  "ino=%llu: out of memory for its fence; %zu extents stay used until "
			  "restart", (unsigned long long)ino, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int j, told;

		for (j = 0; j < r->ns && r->servers[j] != e[i].server_id; j++)
			;
		/*
		 * Not asked because it was down when the fence went out: it gets
		 * a new epoch before serving again, even if that happened since
		 * (freeing.c fences and frees apart). Only past the cap may an up
		 * server have gone unasked.
		 */
		if (j < r->ns)
			told = r->status[j] == 0;
		else
			told = !r->capped || !registry_is_up(&ms->reg, e[i].server_id);
		/* not told: its blocks wait for its next registration (a new epoch) */
		if (!told && registry_hold(&ms->reg, e[i].server_id, &e[i], 1) == 0)
			continue;
		alloc_free(&ms->alloc, e[i].server_id, e[i].block, e[i].count);
	}
}

void fence_and_free(struct ms *ms, uint64_t ino, const struct ms_ext *e, size_t n)
{
	struct fence_result r;

	fence_only(ms, ino, e, n, &r);
	fence_free(ms, ino, e, n, &r);
}
