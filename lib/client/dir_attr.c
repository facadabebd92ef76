// SPDX-License-Identifier: MIT
/*
 * dir_attr.c - attributes of directories this client just changed, kept to
 * answer the kernel's next GETATTR of them without asking the metaserver.
 *
 * Why: a FUSE kernel drops its cached attributes of a directory whenever a
 * name is added to or removed from it, and its permission check before the
 * next create or unlink there asks for them again at once. The metaserver
 * puts the directory's attributes, as they were right after the change, in
 * the reply of MKNOD, MKDIR, SYMLINK, LINK, UNLINK, RMDIR and RENAME; the
 * first GETATTR of that directory within opts.dir_attr_ms of the reply is
 * answered from here, and the entry is gone after it. That is what the
 * kernel would have done had it cached the reply's attributes for its own
 * attribute timeout, which is the value rdfs-fuse gives: a change made
 * meanwhile by another client stays unseen no longer than it would in the
 * kernel's cache. Changes of a directory's attributes made through this
 * client without attributes in the reply (setattr, xattrs, rename of the
 * directory itself) forget it.
 *
 * Threads: any; one mutex over a small direct-mapped table (a collision
 * replaces the older entry: a miss only costs the RPC it always cost).
 */
#include <string.h>
#include <time.h>

#include "client_internal.h"

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct dir_attr_entry *slot(struct dir_attr_cache *t, uint64_t ino)
{
	return &t->e[(ino * 0x9E3779B97F4A7C15ull) >> (64 - DIR_ATTR_BITS)];
}

void dir_attr_init(struct dir_attr_cache *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void dir_attr_destroy(struct dir_attr_cache *t)
{
	pthread_mutex_destroy(&t->lock);
}

void dir_attr_note(struct rdfs_client *c, const Rdfs__Attr *a)
{
	struct dir_attr_cache *t = &c->dattr;
	struct dir_attr_entry *e;

	if (c->opts.dir_attr_ms <= 0 || !a || !S_ISDIR(a->mode) || !a->ino)
		return;
	pthread_mutex_lock(&t->lock);
	e = slot(t, a->ino);
	attr_to_stat(a, &e->st);
	e->ino = a->ino;
	e->expires_ms = mono_ms() + c->opts.dir_attr_ms;
	pthread_mutex_unlock(&t->lock);
}

int dir_attr_take(struct rdfs_client *c, uint64_t ino, struct stat *st)
{
	struct dir_attr_cache *t = &c->dattr;
	struct dir_attr_entry *e;
	int hit = 0;

	if (c->opts.dir_attr_ms <= 0)
		return 0;
	pthread_mutex_lock(&t->lock);
	e = slot(t, ino);
	if (e->ino == ino && ino) {
		hit = mono_ms() < e->expires_ms;
		if (hit)
			*st = e->st;
		e->ino = 0;
	}
	pthread_mutex_unlock(&t->lock);
	if (hit)
		__atomic_add_fetch(&c->stats.dir_attr_hits, 1, __ATOMIC_RELAXED);
	return hit;
}

void dir_attr_forget(struct rdfs_client *c, uint64_t ino)
{
	struct dir_attr_cache *t = &c->dattr;

	if (c->opts.dir_attr_ms <= 0)
		return;
	pthread_mutex_lock(&t->lock);
	if (ino == 0) {
		for (size_t i = 0; i < DIR_ATTR_SLOTS; i++)
			t->e[i].ino = 0;
	} else if (slot(t, ino)->ino == ino) {
		slot(t, ino)->ino = 0;
	}
	pthread_mutex_unlock(&t->lock);
}
