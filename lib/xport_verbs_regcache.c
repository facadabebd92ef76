// SPDX-License-Identifier: MIT
/*
 * xport_verbs_regcache.c - declared long-lived ranges and the per-device cache
 * of their registrations (what may be cached and why: xport_verbs_regcache.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "xport_verbs_regcache.h"

void verbs_decl_init(struct verbs_decl_set *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->r = NULL;
	s->n = s->cap = 0;
}

void verbs_decl_fini(struct verbs_decl_set *s)
{
	free(s->r);
	s->r = NULL;
	s->n = s->cap = 0;
	pthread_mutex_destroy(&s->lock);
}

/* Index of the first range whose end is beyond @start. */
static size_t decl_lower(const struct verbs_decl_set *s, uintptr_t start)
{
	size_t lo = 0, hi = s->n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (s->r[mid].start + s->r[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int verbs_decl_add(struct verbs_decl_set *s, const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr;
	struct verbs_range *nr;
	size_t i;
	int err = 0;

	if (!len || start + len < start)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	i = decl_lower(s, start);
	if (i < s->n && s->r[i].start < start + len) {
		err = -EEXIST;
		goto out;
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 16;

		nr = realloc(s->r, ncap * sizeof(*nr));
		if (!nr) {
			err = -ENOMEM;
			goto out;
		}
		s->r = nr;
		s->cap = ncap;
	}
	memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(*s->r));
	s->r[i].start = start;
	s->r[i].len = len;
	s->n++;
out:
	pthread_mutex_unlock(&s->lock);
	return err;
}

int verbs_decl_remove(struct verbs_decl_set *s, const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr;
	size_t i;
	int err = -ENOENT;

	pthread_mutex_lock(&s->lock);
	i = decl_lower(s, start);
	if (i < s->n && s->r[i].start == start && s->r[i].len == len) {
		memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof(*s->r));
		s->n--;
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

int verbs_decl_find(struct verbs_decl_set *s, const void *addr, size_t len,
		    struct verbs_range *out)
{
	uintptr_t start = (uintptr_t)addr;
	size_t i;
	int err = -ENOENT;

	if (!len || start + len < start)
		return -ENOENT;
	pthread_mutex_lock(&s->lock);
	i = decl_lower(s, start);
	if (i < s->n && s->r[i].start <= start &&
	    start + len <= s->r[i].start + s->r[i].len) {
		*out = s->r[i];
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

void verbs_regcache_init(struct verbs_regcache *rc, const struct verbs_reg_ops *ops,
			 void *arg, size_t max_bytes)
{
	memset(rc, 0, sizeof(*rc));
	pthread_mutex_init(&rc->lock, NULL);
	rc->ops = ops;
	rc->arg = arg;
	rc->max_bytes = max_bytes;
}

static void entry_unlink_locked(struct verbs_regcache *rc, struct verbs_reg_entry *e)
{
	struct verbs_reg_entry **pp;

	for (pp = &rc->head; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			rc->bytes -= e->range.len;
			return;
		}
	}
}

void verbs_regcache_fini(struct verbs_regcache *rc)
{
	struct verbs_reg_entry *e;

	while ((e = rc->head)) {
		rc->head = e->next;
		if (e->refs)
			log_warn(1000056, "verbs: registration of %zu bytes freed while in use", e->range.len);
		rc->ops->dereg(rc->arg, e->handle);
		free(e);
	}
	rc->bytes = 0;
	pthread_mutex_destroy(&rc->lock);
}

/* Deregister least recently used idle entries until @need more bytes fit. */
static void evict_locked(struct verbs_regcache *rc, size_t need)
{
	struct verbs_reg_entry *e, *lru;

	while (rc->bytes + need > rc->max_bytes) {
		lru = NULL;
		for (e = rc->head; e; e = e->next)
			if (!e->refs && (!lru || e->last_use < lru->last_use))
				lru = e;
		if (!lru)
			return;		/* all in use: go over the bound rather than fail a send */
		entry_unlink_locked(rc, lru);
		rc->ops->dereg(rc->arg, lru->handle);
		free(lru);
		rc->evictions++;
	}
}

int verbs_regcache_get(struct verbs_regcache *rc, const struct verbs_range *r,
		       struct verbs_reg_entry **out)
{
	struct verbs_reg_entry *e;
	int err;

	pthread_mutex_lock(&rc->lock);
	for (e = rc->head; e; e = e->next) {
		if (!e->dead && e->range.start == r->start && e->range.len == r->len) {
			rc->hits++;
			goto found;
		}
	}
	rc->misses++;
	e = calloc(1, sizeof(*e));
	if (!e) {
		err = -ENOMEM;
		goto err;
	}
	evict_locked(rc, r->len);
	err = rc->ops->reg(rc->arg, r->start, r->len, &e->handle);
	if (err) {
		free(e);
		goto err;
	}
	e->range = *r;
	e->next = rc->head;
	rc->head = e;
	rc->bytes += r->len;
found:
	e->refs++;
	e->last_use = ++rc->clock;
	pthread_mutex_unlock(&rc->lock);
	*out = e;
	return 0;
err:
	pthread_mutex_unlock(&rc->lock);
	return err;
}

void verbs_regcache_put(struct verbs_regcache *rc, struct verbs_reg_entry *e)
{
	int drop;

	pthread_mutex_lock(&rc->lock);
	drop = --e->refs == 0 && e->dead;
	if (drop)
		entry_unlink_locked(rc, e);
	pthread_mutex_unlock(&rc->lock);
	if (drop) {
		rc->ops->dereg(rc->arg, e->handle);
		free(e);
	}
}

void verbs_regcache_invalidate(struct verbs_regcache *rc, const struct verbs_range *r)
{
	struct verbs_reg_entry *e, *next, *drop = NULL;

	pthread_mutex_lock(&rc->lock);
	for (e = rc->head; e; e = next) {
		next = e->next;
		if (e->range.start >= r->start + r->len || r->start >= e->range.start + e->range.len)
			continue;
		e->dead = 1;
		if (!e->refs) {
			entry_unlink_locked(rc, e);
			e->next = drop;
			drop = e;
		}
	}
	pthread_mutex_unlock(&rc->lock);
	while ((e = drop)) {
		drop = e->next;
		rc->ops->dereg(rc->arg, e->handle);
		free(e);
	}
}
