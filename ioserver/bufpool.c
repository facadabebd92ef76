// SPDX-License-Identifier: MIT
/*
 * bufpool.c - bounded pool of aligned data buffers (see bufpool.h).
 *
 * Unit-size buffers are declared to the transport (xport_mem_register) for as
 * long as the pool owns them: an RDMA connection then registers each once and
 * exposes it to a peer per send through a window, instead of registering and
 * deregistering the buffer for every reply unit. Other sizes come and go with
 * one request, so declaring them would buy nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "bufpool.h"
#include "frame.h"
#include "log.h"
#include "xport.h"

struct free_buf {
	struct free_buf *next;
	size_t len;			/* free_other only */
};

struct bufpool {
	pthread_mutex_t mutex;
	size_t budget;
	size_t used;			/* bytes handed out or kept on the free list */
	size_t unit;
	struct free_buf *free_units;	/* recycled unit-size buffers */
	/*
	 * Recycled buffers of other sizes (whole-mode READs, large writes),
	 * reused for the same length: a fresh one costs an mmap, page faults
	 * and zeroing per request, which would load the comparison of send
	 * modes against `whole`. Freed first when the budget is short.
	 */
	struct free_buf *free_other;
};

static size_t round_len(size_t len)
{
	return (len + RDFS_BLOCK_SIZE - 1) / RDFS_BLOCK_SIZE * RDFS_BLOCK_SIZE;
}

static void *aligned(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, RDFS_BLOCK_SIZE, len) ? NULL : p;
}

/* A unit-size buffer, declared long-lived until unit_free(). */
static void *unit_alloc(size_t unit)
{
	void *b = aligned(unit);

	/* Undeclared memory still works (registered per send): not an error. */
	if (b && xport_mem_register(b, unit))
		log_debug(1200001, "bufpool: %zu-byte buffer not declared to the transport", unit);
	return b;
}

static void unit_free(void *b, size_t unit)
{
	xport_mem_deregister(b, unit);
	free(b);
}

int bufpool_create(size_t budget, size_t unit, int prealloc, struct bufpool **out)
{
	struct bufpool *p;
	struct free_buf *b;
	int i;

	unit = round_len(unit);
	if (budget < RDFS_MAX_DATA || !unit)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mutex, NULL);
	p->budget = budget;
	p->unit = unit;
	for (i = 0; i < prealloc && p->used + unit <= budget; i++) {
		b = unit_alloc(unit);
		if (!b)
			break;
		b->next = p->free_units;
		p->free_units = b;
		p->used += unit;
	}
	*out = p;
	return 0;
}

void bufpool_destroy(struct bufpool *p)
{
	struct free_buf *b;

	if (!p)
		return;
	while ((b = p->free_units)) {
		p->free_units = b->next;
		unit_free(b, p->unit);
	}
	while ((b = p->free_other)) {
		p->free_other = b->next;
		free(b);
	}
	pthread_mutex_destroy(&p->mutex);
	free(p);
}

/* Under the mutex: free recycled units until @len more bytes fit the budget. */
static int make_room(struct bufpool *p, size_t len)
{
	struct free_buf *b;

	while (p->used + len > p->budget && (b = p->free_other)) {
		p->free_other = b->next;
		p->used -= b->len;
		free(b);
	}
	while (p->used + len > p->budget && (b = p->free_units)) {
		p->free_units = b->next;
		unit_free(b, p->unit);
		p->used -= p->unit;
	}
	return p->used + len <= p->budget;
}

void *bufpool_get(struct bufpool *p, size_t len)
{
	struct free_buf *b = NULL;
	void *buf;

	len = round_len(len);
	pthread_mutex_lock(&p->mutex);
	if (len == p->unit && p->free_units) {
		b = p->free_units;
		p->free_units = b->next;
		pthread_mutex_unlock(&p->mutex);
		return b;
	}
	if (len != p->unit) {
		struct free_buf **pp;

		for (pp = &p->free_other; (b = *pp); pp = &b->next) {
			if (b->len == len) {
				*pp = b->next;
				pthread_mutex_unlock(&p->mutex);
				return b;
			}
		}
	}
	if (!make_room(p, len)) {
		pthread_mutex_unlock(&p->mutex);
		return NULL;
	}
	p->used += len;
	pthread_mutex_unlock(&p->mutex);
	buf = len == p->unit ? unit_alloc(len) : aligned(len);
	if (!buf) {
		pthread_mutex_lock(&p->mutex);
		p->used -= len;
		pthread_mutex_unlock(&p->mutex);
	}
	return buf;
}

void bufpool_put(struct bufpool *p, void *buf, size_t len)
{
	struct free_buf *b = buf;

	if (!buf)
		return;
	len = round_len(len);
	pthread_mutex_lock(&p->mutex);
	if (len == p->unit) {
		b->next = p->free_units;
		p->free_units = b;
		pthread_mutex_unlock(&p->mutex);
		return;
	}
	b->len = len;
	b->next = p->free_other;
	p->free_other = b;
	pthread_mutex_unlock(&p->mutex);
}

size_t bufpool_budget(const struct bufpool *p)
{
	return p->budget;
}
