// SPDX-License-Identifier: MIT
/*
 * handles.c - open files: sessions (one per peer connection) own handles, and
 * the open table counts the handles of each inode over all sessions, so an
 * unlinked file lives (as an orphan, nlink 0) until its last handle is gone.
 *
 * Blocks a truncate takes from a file, open or not, go back to the allocator
 * at once, after the fence (fence.c): a client's cached capabilities of the
 * file stop working first, so nothing here waits for a last close.
 *
 * The open count of an inode only changes under that inode's lock, which is
 * also what unlink holds when it decides between purging and orphaning.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "ms_int.h"

void opentab_init(struct ms_opentab *t)
{
	pthread_mutex_init(&t->mu, NULL);
	memset(t->bucket, 0, sizeof(t->bucket));
}

void opentab_destroy(struct ms_opentab *t)
{
	for (int i = 0; i < MS_OPENTAB_BUCKETS; i++) {
		struct ms_openent *e = t->bucket[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	pthread_mutex_destroy(&t->mu);
}

static struct ms_openent **opentab_slot(struct ms_opentab *t, uint64_t ino)
{
	struct ms_openent **p = &t->bucket[(ino * 0x9e3779b97f4a7c15ull) >> 52];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

uint32_t opentab_count(struct ms_opentab *t, uint64_t ino)
{
	struct ms_openent **p;
	uint32_t n;

	pthread_mutex_lock(&t->mu);
	p = opentab_slot(t, ino);
	n = *p ? (*p)->count : 0;
	pthread_mutex_unlock(&t->mu);
	return n;
}

int opentab_inc(struct ms_opentab *t, uint64_t ino)
{
	struct ms_openent **p;
	int ret = 0;

	pthread_mutex_lock(&t->mu);
	p = opentab_slot(t, ino);
	if (!*p) {
		*p = calloc(1, sizeof(**p));
		if (*p)
			(*p)->ino = ino;
	}
	if (*p)
		(*p)->count++;
	else
		ret = -ENOMEM;
	pthread_mutex_unlock(&t->mu);
	return ret;
}

uint32_t opentab_dec(struct ms_opentab *t, uint64_t ino)
{
	struct ms_openent **p, *e;
	uint32_t n = 0;

	pthread_mutex_lock(&t->mu);
	p = opentab_slot(t, ino);
	e = *p;
	if (e) {
		n = --e->count;
		if (n == 0) {
			*p = e->next;
			free(e);
		}
	}
	pthread_mutex_unlock(&t->mu);
	return n;
}

struct ms_session *ms_session_new(struct ms *ms, const char *identity)
{
	struct ms_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->identity, sizeof(s->identity), "%s", identity ? identity : "");
	return s;
}

void ms_session_set_squash(struct ms_session *s, const struct ms_squash *sq)
{
	pthread_mutex_lock(&s->mu);
	s->squash = *sq;
	pthread_mutex_unlock(&s->mu);
}

void ms_session_squash(struct ms_session *s, struct ms_squash *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->squash;
	pthread_mutex_unlock(&s->mu);
}

const char *ms_session_identity(const struct ms_session *s)
{
	return s->identity;
}

int ms_session_is_server(const struct ms_session *s)
{
	return strcmp(s->identity, "server") == 0;
}

uint64_t handle_add(struct ms *ms, struct ms_session *s, uint64_t ino, uint32_t flags)
{
	struct ms_handle *h = calloc(1, sizeof(*h));

	if (!h)
		return 0;
	/* an untracked handle would let its file's blocks be reused under it */
	if (opentab_inc(&ms->opentab, ino)) {
		free(h);
		return 0;
	}
	h->id = atomic_fetch_add(&ms->next_handle, 1);
	h->ino = ino;
	h->flags = flags;
	pthread_mutex_lock(&s->mu);
	h->next = s->handles;
	s->handles = h;
	pthread_mutex_unlock(&s->mu);
	return h->id;
}

int handle_flags(struct ms_session *s, uint64_t id, uint64_t ino, uint32_t *flags)
{
	int ret = -EBADF;

	if (!s || id == 0)
		return -EBADF;
	pthread_mutex_lock(&s->mu);
	for (struct ms_handle *h = s->handles; h; h = h->next)
		if (h->id == id && h->ino == ino) {
			*flags = h->flags;
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&s->mu);
	return ret;
}

/*
 * The last handle of regular file @in is gone: free the unwritten blocks past
 * its end that the writers preallocated, in one batch. The caller holds the
 * inode lock and the open count is 0, so they are freed at once (no handle
 * is left that may hold a layout naming them). A failure only keeps them
 * allocated until the file is truncated or removed.
 */
static void inode_trim_prealloc(struct ms *ms, struct ms_inode *in)
{
	struct ms_batch mb;
	struct ms_freelist f = { 0 };
	uint64_t blocks = in->blocks;
	int ret;

	ms_batch_init(&mb);
	ret = layout_trim_unwritten(ms, mb.b, in, &f);
	if (!ret && in->blocks != blocks) {
		ns_inode_put(&mb, in);
		ret = ns_write_freeing(ms, &mb, &f);
	}
	ms_batch_destroy(ms, &mb);
	if (ret)
		log_warn(1100011, "ino=%llu: cannot free its preallocated blocks: %s",
			 (unsigned long long)in->ino, strerror(-ret));
	freelist_release(ms, &f, ret == 0 && in->blocks != blocks);
}

/*
 * Drop one open of @ino. At its last: the inode is reclaimed if it has no
 * links, else, with @trim, the unwritten blocks past its end (speculative
 * preallocation) are freed.
 *
 * A broken connection does not trim: its client may reconnect and COMMIT
 * writes it made into those blocks (the size only grows at COMMIT), so they
 * stay until the file's next last release, truncate or removal.
 */
static int inode_close(struct ms *ms, uint64_t ino, int trim)
{
	struct ms_lockset ls;
	struct ms_inode in;
	int ret = 0;

	lockset_init(&ls);
	lockset_add(&ls, ino);
	lockset_lock(&ms->locks, &ls);
	if (opentab_dec(&ms->opentab, ino) == 0 &&
	    ns_inode_get(ms, ino, &in) == 0) {
		if (in.nlink == 0) {
			struct ms_batch mb;
			struct ms_freelist f = { 0 };

			ms_batch_init(&mb);
			ret = ns_inode_purge(ms, &mb, ino, &in, NS_PURGE_ORPHAN, &f);
			if (!ret)
				ret = ns_write_freeing(ms, &mb, &f);
			ms_batch_destroy(ms, &mb);
			freelist_release(ms, &f, ret == 0);
		} else if (trim && S_ISREG(in.mode)) {
			inode_trim_prealloc(ms, &in);
		}
	}
	lockset_unlock(&ms->locks, &ls);
	return ret;
}

int ms_release(struct ms *ms, struct ms_session *s, uint64_t handle)
{
	struct ms_handle **p, *h = NULL;
	uint64_t ino;

	pthread_mutex_lock(&s->mu);
	for (p = &s->handles; *p; p = &(*p)->next)
		if ((*p)->id == handle) {
			h = *p;
			*p = h->next;
			break;
		}
	pthread_mutex_unlock(&s->mu);
	if (!h)
		return -EBADF;
	ino = h->ino;
	free(h);
	return inode_close(ms, ino, 1);
}

void ms_session_close(struct ms *ms, struct ms_session *s)
{
	struct ms_handle *h, *next;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	h = s->handles;
	s->handles = NULL;
	pthread_mutex_unlock(&s->mu);
	for (; h; h = next) {
		next = h->next;
		if (inode_close(ms, h->ino, 0))
			log_warn(1100012,
				 "ino=%llu: reclaim at close failed; it is reclaimed at restart",
				 (unsigned long long)h->ino);
		free(h);
	}
	registry_session_closed(&ms->reg, s);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void ms_session_discard(struct ms_session *s)
{
	struct ms_handle *h, *next;

	if (!s)
		return;
	for (h = s->handles; h; h = next) {
		next = h->next;
		free(h);
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int ms_open_file(struct ms *ms, struct ms_session *s, const struct ms_cred *cr, uint64_t ino,
		 uint32_t flags, struct ms_attr *out, uint64_t *handle)
{
	struct ms_lockset ls;
	struct ms_inode in;
	int ret;

	ret = ns_inode_lock_get(ms, &ls, ino, &in);
	if (ret)
		goto out;
	ret = perm_open(&in, cr, flags);
	if (ret)
		goto out;
	/* O_TRUNC of an existing file marks mtime and ctime even when it was empty (POSIX) */
	if ((flags & O_TRUNC) && S_ISREG(in.mode)) {
		struct ms_batch mb;
		struct ms_freelist f = { 0 };

		ms_batch_init(&mb);
		ret = layout_truncate(ms, mb.b, &in, 0, &f);
		if (!ret) {
			in.size = 0;
			in.mtime_ns = in.ctime_ns = ns_now();
			if (cr->uid != 0) {
				in.mode &= ~(uint32_t)S_ISUID;
				if (in.mode & S_IXGRP)
					in.mode &= ~(uint32_t)S_ISGID;
			}
			ns_inode_put(&mb, &in);
			ret = ns_write_freeing(ms, &mb, &f);
		}
		ms_batch_destroy(ms, &mb);
		freelist_release(ms, &f, ret == 0);
		if (ret)
			goto out;
	}
	*handle = handle_add(ms, s, ino, flags);
	if (!*handle)
		ret = -ENOMEM;
	ns_attr_from_inode(&in, out);
out:
	lockset_unlock(&ms->locks, &ls);
	return ret;
}
