// SPDX-License-Identifier: MIT
/*
 * freeing.c - the blocks of files gone for good, on their way back to the
 * allocator: fenced after the reply of the remove that freed them, not
 * before it.
 *
 * A freed block may go to another file only once the I/O servers holding it
 * have taken the fence of its old file (fence.c): until then a capability
 * granted for that file still reaches it. Waiting for their answer before the
 * reply put an I/O-server round trip into every remove of a file with data,
 * under its locks. With ms_set_freeing_async() (the metaserver's server does
 * it; unit tests choose), a batch that purged an inode queues the freed
 * extents here once it is durable (freelist_release()), and the operation
 * replies; one thread fences each queued file and only then returns its
 * blocks to the maps, or to the registry's hold for a server the fence did
 * not reach, exactly as fence_and_free() does inline.
 *
 * Meanwhile the blocks are neither in a layout nor free: fsck counts them as
 * held (freeing_copy()), and an allocation that finds no space waits for the
 * queue to empty and tries once more (freeing_wait(), ms_layout()), so a
 * write after `rm` never gets an ENOSPC the remove should have cured.
 *
 * Only purged inodes are queued: no LAYOUT can name them again, so their fence
 * needs no inode lock, and their generation is forgotten after it. A crash
 * loses the queue and nothing else: the maps are rebuilt from the layouts at
 * start, and every I/O server's new registration epoch fences every
 * capability granted before.
 *
 * Threads: operations queue (holding blocks_rw shared, as for an inline free);
 * the freeing thread fences with no lock held, then returns the blocks and
 * takes the item off the queue within one hold of blocks_rw shared, so fsck's
 * moment (blocks_rw exclusive) finds each block in exactly one place. fr->mu
 * guards the queue; it is taken after blocks_rw and never held across a call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ms_int.h"

struct freeing_item {
	uint64_t ino;
	struct ms_ext *e;
	size_t n;
	struct freeing_item *next;
};

static void *freeing_main(void *arg)
{
	struct ms *ms = arg;
	struct ms_freeing *fr = &ms->freeing;
	struct fence_result r;

	pthread_mutex_lock(&fr->mu);
	for (;;) {
		struct freeing_item *it;

		while (!fr->head && !fr->stopping)
			pthread_cond_wait(&fr->work, &fr->mu);
		it = fr->head;
		if (!it)
			break;
		pthread_mutex_unlock(&fr->mu);
		/* still listed: fsck sees the blocks as held until they are back */
		fence_only(ms, it->ino, it->e, it->n, &r);
		pthread_rwlock_rdlock(&ms->blocks_rw);
		fence_free(ms, it->ino, it->e, it->n, &r);
		pthread_mutex_lock(&fr->mu);
		fr->head = it->next;
		if (!fr->head)
			fr->tail = &fr->head;
		fr->blocks -= ext_blocks(it->e, it->n);
		fr->done++;
		pthread_cond_broadcast(&fr->drained);
		pthread_mutex_unlock(&fr->mu);
		pthread_rwlock_unlock(&ms->blocks_rw);
		gens_forget(ms, it->ino);
		free(it->e);
		free(it);
		pthread_mutex_lock(&fr->mu);
	}
	pthread_mutex_unlock(&fr->mu);
	return NULL;
}

uint64_t ext_blocks(const struct ms_ext *e, size_t n)
{
	uint64_t b = 0;

	for (size_t i = 0; i < n; i++)
		b += e[i].count;
	return b;
}

void freeing_init(struct ms_freeing *fr)
{
	memset(fr, 0, sizeof(*fr));
	pthread_mutex_init(&fr->mu, NULL);
	pthread_cond_init(&fr->work, NULL);
	pthread_cond_init(&fr->drained, NULL);
	fr->tail = &fr->head;
}

void freeing_destroy(struct ms_freeing *fr)
{
	pthread_cond_destroy(&fr->drained);
	pthread_cond_destroy(&fr->work);
	pthread_mutex_destroy(&fr->mu);
}

int ms_set_freeing_async(struct ms *ms, int on)
{
	struct ms_freeing *fr = &ms->freeing;
	int ret = 0;

	if (on && !fr->running) {
		fr->stopping = 0;
		ret = -pthread_create(&fr->thread, NULL, freeing_main, ms);
		if (ret == 0)
			fr->running = 1;
		return ret;
	}
	if (!on && fr->running) {
		/* what is queued is fenced and freed first */
		pthread_mutex_lock(&fr->mu);
		fr->stopping = 1;
		pthread_cond_broadcast(&fr->work);
		pthread_mutex_unlock(&fr->mu);
		pthread_join(fr->thread, NULL);
		fr->running = 0;
	}
	return 0;
}

int freeing_queue(struct ms *ms, uint64_t ino, struct ms_ext *e, size_t n)
{
	struct ms_freeing *fr = &ms->freeing;
	struct freeing_item *it;

	if (!fr->running || !ms->fence)
		return -ESRCH;
	it = malloc(sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->ino = ino;
	it->e = e;
	it->n = n;
	it->next = NULL;
	pthread_mutex_lock(&fr->mu);
	if (fr->stopping) {
		pthread_mutex_unlock(&fr->mu);
		free(it);
		return -ESRCH;
	}
	*fr->tail = it;
	fr->tail = &it->next;
	fr->blocks += ext_blocks(e, n);
	fr->queued++;
	pthread_cond_signal(&fr->work);
	pthread_mutex_unlock(&fr->mu);
	return 0;
}

int freeing_copy(struct ms *ms, struct ms_ext **out, size_t *n)
{
	struct ms_freeing *fr = &ms->freeing;
	struct freeing_item *it;
	int ret = 0;

	pthread_mutex_lock(&fr->mu);
	for (it = fr->head; it && !ret; it = it->next) {
		struct ms_ext *e = realloc(*out, (*n + it->n) * sizeof(*e));

		if (!e) {
			ret = -ENOMEM;
			break;
		}
		memcpy(e + *n, it->e, it->n * sizeof(*e));
		*out = e;
		*n += it->n;
	}
	pthread_mutex_unlock(&fr->mu);
	return ret;
}

int freeing_wait(struct ms *ms)
{
	struct ms_freeing *fr = &ms->freeing;
	uint64_t target;
	int waited = 0;

	pthread_mutex_lock(&fr->mu);
	/* what is queued now; removes that keep coming must not hold us forever */
	target = fr->queued;
	while (fr->done < target) {
		waited = 1;
		pthread_cond_wait(&fr->drained, &fr->mu);
	}
	pthread_mutex_unlock(&fr->mu);
	return waited;
}

void ms_freeing_stats(struct ms *ms, uint64_t *queued, uint64_t *done, uint64_t *blocks)
{
	struct ms_freeing *fr = &ms->freeing;

	pthread_mutex_lock(&fr->mu);
	*queued = fr->queued;
	*done = fr->done;
	*blocks = fr->blocks;
	pthread_mutex_unlock(&fr->mu);
}
