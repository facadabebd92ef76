/* SPDX-License-Identifier: MIT */
/*
 * xport_verbs_regcache.h - memory registration cache of the verbs module.
 *
 * Registering memory pins it and costs a system call plus page-table work per
 * page, far more than sending a small unit; a cache keeps registrations across
 * sends (BMI section 4.1: MPICH-GM's cache is why it beat BMI-GM). But a
 * cached registration of memory that was freed and reused would send (or
 * receive) the wrong pages, and user space cannot see a free(). So the cache
 * only holds memory whose owner *declared* it long-lived:
 *
 *   xport_mem_register(addr, len)    the range stays mapped until ...
 *   xport_mem_deregister(addr, len)  ... this, which drops its registrations
 *
 * (the I/O server's pipeline buffers, a client's long-lived I/O buffers).
 * Declared ranges are process-wide (struct verbs_decl_set); registrations are per
 * protection domain (struct verbs_regcache), made lazily on first use, whole
 * declared range at a time, and bounded: past max_bytes the least recently used
 * unreferenced ones are deregistered (and made again when needed). Memory
 * nobody declared (ad-hoc buffers) is registered per send and deregistered
 * when the send completes: always correct, never cached.
 *
 * Cached registrations carry no remote access (LOCAL_WRITE | MW_BIND): a peer
 * gets a memory window bound for one send over exactly that send's bytes, so a
 * cached registration never hands out a long-lived rkey.
 *
 * Both structures are pure (registration is a callback), each with its own lock.
 */
#ifndef RDFS_XPORT_VERBS_REGCACHE_H
#define RDFS_XPORT_VERBS_REGCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct verbs_range {
	uintptr_t start;
	size_t len;
};

/* ------------------------------------------------------------------ declared ranges */

struct verbs_decl_set {
	pthread_mutex_t lock;
	struct verbs_range *r;		/* sorted by start, never overlapping */
	size_t n, cap;
};

void verbs_decl_init(struct verbs_decl_set *s);
void verbs_decl_fini(struct verbs_decl_set *s);
/* -EINVAL for an empty range, -EEXIST if it overlaps a declared one. */
int verbs_decl_add(struct verbs_decl_set *s, const void *addr, size_t len);
/* Remove exactly [addr, addr+len). -ENOENT if that is not a declared range. */
int verbs_decl_remove(struct verbs_decl_set *s, const void *addr, size_t len);
/* The declared range that contains all of [addr, addr+len): 0, or -ENOENT. */
int verbs_decl_find(struct verbs_decl_set *s, const void *addr, size_t len,
		    struct verbs_range *out);

/* ------------------------------------------------------------------ registrations */

struct verbs_reg_ops {
	/* Register [start, start+len); *handle is what the module needs (an ibv_mr). */
	int (*reg)(void *arg, uintptr_t start, size_t len, void **handle);
	void (*dereg)(void *arg, void *handle);
};

struct verbs_reg_entry {
	struct verbs_range range;
	void *handle;
	int refs;		/* sends using it now: never evicted while > 0 */
	int dead;		/* range undeclared: dereg at the last put */
	uint64_t last_use;
	struct verbs_reg_entry *next;
};

struct verbs_regcache {
	pthread_mutex_t lock;
	const struct verbs_reg_ops *ops;
	void *arg;
	struct verbs_reg_entry *head;
	size_t bytes, max_bytes;
	uint64_t clock;
	uint64_t hits, misses, evictions;	/* for tests and logs */
};

void verbs_regcache_init(struct verbs_regcache *rc, const struct verbs_reg_ops *ops,
			 void *arg, size_t max_bytes);
/* Deregister everything; entries still referenced are a caller bug (logged). */
void verbs_regcache_fini(struct verbs_regcache *rc);
/*
 * The registration of declared range @r (from verbs_decl_find), made now if
 * not cached. Takes a reference; verbs_regcache_put() it when the send is done.
 */
int verbs_regcache_get(struct verbs_regcache *rc, const struct verbs_range *r,
		       struct verbs_reg_entry **out);
void verbs_regcache_put(struct verbs_regcache *rc, struct verbs_reg_entry *e);
/* Range @r was undeclared: drop its registration now, or at its last put. */
void verbs_regcache_invalidate(struct verbs_regcache *rc, const struct verbs_range *r);

#endif
