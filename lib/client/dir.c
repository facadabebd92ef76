// SPDX-License-Identifier: MIT
/*
 * dir.c - directory streams. The metaserver pages a directory in name order and
 * resumes strictly after a name, so a stream stays correct while the directory
 * changes; the stream keeps every entry it fetched so that an index handed out
 * as a seekdir/telldir offset always names the same entry. "." and ".." are not
 * entries (the caller adds them where its API needs them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

#define DIR_PAGE	1024

struct rdfs_dir {
	struct rdfs_client *c;
	struct rdfs_cred cred;
	uint64_t ino;
	pthread_mutex_t lock;
	struct rdfs_dirent *ent;
	size_t n;
	size_t cap;
	int eof;
};

/* Fetch the next page after the last entry we hold. Under d->lock. */
static int dir_fetch(struct rdfs_dir *d)
{
	Rdfs__ReaddirReq req = RDFS__READDIR_REQ__INIT;
	Rdfs__ReaddirReply *rep = NULL;
	Rdfs__Cred cred;
	size_t i, before = d->n;
	int ret;

	cred_to_pb(&d->cred, &cred);
	req.cred = &cred;
	req.ino = d->ino;
	req.max_entries = DIR_PAGE;
	if (d->n) {
		req.after.data = (uint8_t *)d->ent[d->n - 1].name;
		req.after.len = strlen(d->ent[d->n - 1].name);
	}
	ret = ms_call(d->c, RDFS_OP_READDIR, &req.base, &rdfs__readdir_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	if (d->n + rep->n_entries > d->cap) {
		size_t cap = d->cap ? d->cap : 64;
		struct rdfs_dirent *ent;

		while (cap < d->n + rep->n_entries)
			cap *= 2;
		ent = realloc(d->ent, cap * sizeof(*ent));
		if (!ent) {
			protobuf_c_message_free_unpacked(&rep->base, NULL);
			return -ENOMEM;
		}
		d->ent = ent;
		d->cap = cap;
	}
	for (i = 0; i < rep->n_entries; i++) {
		const Rdfs__Dirent *de = rep->entries[i];
		struct rdfs_dirent *e = &d->ent[d->n];

		if (de->name.len == 0 || de->name.len > RDFS_NAME_MAX)
			continue;
		memcpy(e->name, de->name.data, de->name.len);
		e->name[de->name.len] = '\0';
		e->ino = de->ino;
		e->type = (mode_t)de->type << 12;
		d->n++;
	}
	/*
	 * A page that adds nothing (empty, or only names we refuse) would be
	 * asked for again, after the same name, forever.
	 */
	d->eof = rep->eof || d->n == before;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

int rdfs_opendir(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		 struct rdfs_dir **out)
{
	struct rdfs_dir *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	d->c = c;
	if (cr)
		d->cred = *cr;
	d->ino = ino;
	pthread_mutex_init(&d->lock, NULL);
	/* the first page now: ENOTDIR, EACCES and ENOENT belong to opendir */
	ret = dir_fetch(d);
	if (ret) {
		rdfs_closedir(d);
		return ret;
	}
	*out = d;
	return 0;
}

int rdfs_readdir_at(struct rdfs_dir *d, uint64_t index, struct rdfs_dirent *ent)
{
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	while (index >= d->n && !d->eof) {
		ret = dir_fetch(d);
		if (ret)
			break;
	}
	if (ret == 0 && index < d->n) {
		*ent = d->ent[index];
		ret = 1;
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

void rdfs_closedir(struct rdfs_dir *d)
{
	if (!d)
		return;
	pthread_mutex_destroy(&d->lock);
	free(d->ent);
	free(d);
}
