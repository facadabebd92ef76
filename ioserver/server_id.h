/* SPDX-License-Identifier: MIT */
/*
 * server_id.h - the server id the metaserver assigned, shared between the
 * registration thread (writer) and the io_uring threads (readers).
 *
 * Id and "registered" live in one atomic word so a reader never sees one
 * without the other.
 */
#ifndef RDFS_IOS_SERVER_ID_H
#define RDFS_IOS_SERVER_ID_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#define SERVER_ID_VALID		(1ull << 32)

struct server_id {
	_Atomic uint64_t word;		/* SERVER_ID_VALID | id, or 0 */
};

static inline void server_id_set(struct server_id *s, uint32_t id)
{
	atomic_store(&s->word, SERVER_ID_VALID | id);
}

/* 0 and *@id, or -EAGAIN while no registration has succeeded. */
static inline int server_id_get(const struct server_id *s, uint32_t *id)
{
	uint64_t w = atomic_load(&((struct server_id *)s)->word);

	if (!(w & SERVER_ID_VALID))
		return -EAGAIN;
	*id = (uint32_t)w;
	return 0;
}

#endif
