// SPDX-License-Identifier: MIT
/*
 * ior_layout.c - where each transfer goes: IOR's segmented layout of a shared
 * file, or one file per task, which task reads whose data back, and in which
 * order a task moves its transfers (-z).
 */
#include <stdio.h>

#include "ior.h"

uint64_t ior_xfer_offset(const struct ior_params *p, int task, uint64_t segment, uint64_t k)
{
	if (p->file_per_proc)
		return segment * p->block + k * p->xfer;
	return segment * (uint64_t)p->ntasks * p->block + (uint64_t)task * p->block + k * p->xfer;
}

void ior_task_path(const struct ior_params *p, int task, char *buf, size_t size)
{
	if (p->file_per_proc)
		snprintf(buf, size, "%s.%08d", p->path, task);
	else
		snprintf(buf, size, "%s", p->path);
}

/*
 * IOR's -C shifts readers by one node's worth of tasks so that no task reads
 * data from its own client cache; with every task on this one client a shift
 * of one task still makes every read cover data another process wrote.
 */
int ior_read_source(const struct ior_params *p, int task)
{
	return p->reorder ? (task + 1) % p->ntasks : task;
}

uint64_t ior_aggregate_bytes(const struct ior_params *p)
{
	return (uint64_t)p->ntasks * p->block * p->segments;
}

uint64_t ior_xfers_per_task(const struct ior_params *p)
{
	return p->block / p->xfer * p->segments;
}

uint64_t ior_index_offset(const struct ior_params *p, int owner, uint64_t idx)
{
	uint64_t per_block = p->block / p->xfer;

	return ior_xfer_offset(p, owner, idx / per_block, idx % per_block);
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * -z: Fisher-Yates over the transfer indices, seeded by (seed, owner) rather
 * than by the reading task, so a -C reader walks the writer's order and a
 * stonewalled write's first n transfers are the ones a reader may ask for.
 */
void ior_xfer_order(const struct ior_params *p, int owner, uint64_t *order)
{
	uint64_t n = ior_xfers_per_task(p), i, state;

	for (i = 0; i < n; i++)
		order[i] = i;
	if (!p->random || n < 2)
		return;
	state = p->seed * 0xd1342543de82ef95ull + (uint64_t)owner;
	for (i = n - 1; i > 0; i--) {
		/* Modulo bias is at most n / 2^64: irrelevant for a benchmark's order. */
		uint64_t j = splitmix64(&state) % (i + 1);
		uint64_t tmp = order[i];

		order[i] = order[j];
		order[j] = tmp;
	}
}
