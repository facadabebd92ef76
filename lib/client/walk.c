// SPDX-License-Identifier: MIT
/*
 * walk.c - rdfs_walk(): a subtree walk done by the metaserver (WALK), batch by
 * batch, for `rdfs du` and `rdfs find`.
 *
 * Contract: any thread, like every rdfs_client call; nothing is kept between
 * calls. Each reply is owned here and freed before the next request; the
 * entries passed to the callback (their paths) live only until it returns.
 * WALK only reads, so a batch is sent again after a reconnect, with the
 * same cursor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

/* Entries per batch: a reply of about 0.5 MiB. */
#define WALK_BATCH 4096

int rdfs_walk(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, int summary,
	      int (*fn)(void *arg, const struct rdfs_walk_entry *e), void *arg,
	      struct rdfs_walk_sums *sums)
{
	Rdfs__WalkReq req = RDFS__WALK_REQ__INIT;
	Rdfs__WalkReply *rep = NULL;
	ProtobufCBinaryData cursor = { 0, NULL };
	uint8_t *held = NULL;
	Rdfs__Cred cred;
	int ret = 0, eof = 0;

	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	req.max_entries = WALK_BATCH;
	req.summary = summary != 0;
	while (!eof && !ret) {
		req.cursor = cursor;
		ret = ms_call(c, RDFS_OP_WALK, &req.base, &rdfs__walk_reply__descriptor, &rep,
			      MS_IDEMPOTENT);
		if (ret)
			break;
		if (sums) {
			sums->files += rep->files;
			sums->dirs += rep->dirs;
			sums->others += rep->others;
			sums->bytes += rep->bytes;
			sums->blocks += rep->blocks;
			sums->denied += rep->denied;
		}
		for (size_t i = 0; i < rep->n_entries && !ret; i++) {
			const Rdfs__WalkEntry *pe = rep->entries[i];
			struct rdfs_walk_entry e = { 0 };
			char *path = NULL;

			if (!pe->attr || memchr(pe->path.data, '\0', pe->path.len)) {
				ret = -EPROTO;
				break;
			}
			path = malloc(pe->path.len + 1);
			if (!path) {
				ret = -ENOMEM;
				break;
			}
			memcpy(path, pe->path.data, pe->path.len);
			path[pe->path.len] = '\0';
			e.path = path;
			e.path_len = pe->path.len;
			attr_to_stat(pe->attr, &e.st);
			e.denied = pe->denied;
			ret = fn ? fn(arg, &e) : 0;
			free(path);
		}
		eof = rep->eof;
		/* a walk that stops moving would never end: the metaserver must move on */
		if (!ret && !eof &&
		    (rep->cursor.len == 0 || (cursor.len == rep->cursor.len &&
					      !memcmp(cursor.data, rep->cursor.data, cursor.len))))
			ret = -EPROTO;
		if (!ret && !eof) {
			uint8_t *next = malloc(rep->cursor.len);

			if (!next) {
				ret = -ENOMEM;
			} else {
				memcpy(next, rep->cursor.data, rep->cursor.len);
				free(held);
				held = next;
				cursor.data = held;
				cursor.len = rep->cursor.len;
			}
		}
		protobuf_c_message_free_unpacked(&rep->base, NULL);
		rep = NULL;
	}
	free(held);
	return ret;
}
