// SPDX-License-Identifier: MIT
/*
 * ior_layout.c - where each transfer goes: IOR's segmented layout of a shared
 * file, or one file per task, and which task reads whose data back.
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
