// SPDX-License-Identifier: MIT
/*
 * dir.c - directory streams. The metaserver pages a directory in name order and
 * resumes strictly after a name, so a stream stays correct while the directory
 * changes; the stream keeps every entry it fetched so that an index handed out
 * as a seekdir/telldir offset always names the same entry. "." and ".." are not
 * entries (the caller adds them where its API needs them).
 *
 * Entries are kept compact (names in one growing buffer): a stream over a
 * million names holds about 40 MB, not a fixed 256-byte name each.
 *
 * Readdirplus (RDFS_DIR_PLUS): a page comes with its entries' attributes. Only
 * the last page's are kept, beside the names: the kernel walks a stream in
 * order and takes them as it goes, and a million-entry stream should not hold
 * a million struct stats.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"

#define DIR_PAGE	1024

struct dir_entry {
	uint64_t ino;
	size_t name;			/* offset in rdfs_dir.names */
	uint8_t len;
	uint8_t type;			/* st_mode >> 12 */
};

struct rdfs_dir {
	struct rdfs_client *c;
	struct rdfs_cred cred;
	uint64_t ino;
	pthread_mutex_t lock;
	struct dir_entry *ent;
	size_t n;
	size_t cap;
	char *names;			/* every entry's name, back to back, no NULs */
	size_t names_len, names_cap;
	int eof;
	int plus;			/* ask for attributes with the next pages */
	size_t page_start, page_n;	/* entries [page_start, +page_n) are the last page */
	struct stat *page_st;		/* their attributes (DIR_PAGE of them), if plus */
	uint8_t *page_has;
};

/* Fetch the next page after the last entry we hold. Under d->lock. */
static int dir_fetch(struct rdfs_dir *d)
{
	Rdfs__ReaddirReq req = RDFS__READDIR_REQ__INIT;
	Rdfs__ReaddirReply *rep = NULL;
	Rdfs__Cred cred;
	size_t i, before = d->n;
	uint64_t then = size_clock_now(d->c);
	int ret;

	cred_to_pb(&d->cred, &cred);
	req.cred = &cred;
	req.ino = d->ino;
	req.max_entries = DIR_PAGE;
	req.plus = d->plus;
	if (d->n) {
		req.after.data = (uint8_t *)d->names + d->ent[d->n - 1].name;
		req.after.len = d->ent[d->n - 1].len;
	}
	ret = ms_call(d->c, RDFS_OP_READDIR, &req.base, &rdfs__readdir_reply__descriptor, &rep,
		      MS_IDEMPOTENT);
	if (ret)
		return ret;
	if (d->n + rep->n_entries > d->cap) {
		size_t cap = d->cap ? d->cap : 64;
		struct dir_entry *ent;

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
	if (d->names_len + rep->n_entries * RDFS_NAME_MAX > d->names_cap) {
		size_t cap = d->names_cap ? d->names_cap : 16384;
		char *names;

		while (cap < d->names_len + rep->n_entries * RDFS_NAME_MAX)
			cap *= 2;
		names = realloc(d->names, cap);
		if (!names) {
			protobuf_c_message_free_unpacked(&rep->base, NULL);
			return -ENOMEM;
		}
		d->names = names;
		d->names_cap = cap;
	}
	d->page_start = d->n;
	d->page_n = 0;
	for (i = 0; i < rep->n_entries; i++) {
		const Rdfs__Dirent *de = rep->entries[i];
		struct dir_entry *e = &d->ent[d->n];

		if (de->name.len == 0 || de->name.len > RDFS_NAME_MAX ||
		    memchr(de->name.data, '\0', de->name.len) || de->type > 017)
			continue;
		memcpy(d->names + d->names_len, de->name.data, de->name.len);
		e->name = d->names_len;
		e->len = (uint8_t)de->name.len;
		d->names_len += de->name.len;
		e->ino = de->ino;
		e->type = (uint8_t)de->type;
		if (d->page_st && d->page_n < DIR_PAGE) {
			/* one that changed type or number meanwhile is looked up instead */
			d->page_has[d->page_n] = de->attr && de->attr->ino == de->ino &&
						 (de->attr->mode & S_IFMT) == (mode_t)e->type << 12;
			if (d->page_has[d->page_n])
				attr_note(d->c, de->attr, then,
					  &d->page_st[d->page_n]);
			d->page_n++;
		}
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
	return rdfs_opendir_flags(c, cr, ino, 0, out);
}

void rdfs_dir_set_plus(struct rdfs_dir *d, int plus)
{
	pthread_mutex_lock(&d->lock);
	d->plus = plus && d->page_st;
	pthread_mutex_unlock(&d->lock);
}

int rdfs_opendir_flags(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino,
		       unsigned int flags, struct rdfs_dir **out)
{
	struct rdfs_dir *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	if (flags & RDFS_DIR_PLUS) {
		d->page_st = malloc(DIR_PAGE * sizeof(*d->page_st));
		d->page_has = malloc(DIR_PAGE);
		if (!d->page_st || !d->page_has) {
			free(d->page_st);
			free(d->page_has);
			free(d);
			return -ENOMEM;
		}
		d->plus = 1;
	}
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
		const struct dir_entry *e = &d->ent[index];

		memcpy(ent->name, d->names + e->name, e->len);
		ent->name[e->len] = '\0';
		ent->ino = e->ino;
		ent->type = (mode_t)e->type << 12;
		ent->has_attr = index >= d->page_start && index - d->page_start < d->page_n &&
				d->page_has[index - d->page_start];
		if (ent->has_attr)
			ent->st = d->page_st[index - d->page_start];
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
	free(d->names);
	free(d->page_st);
	free(d->page_has);
	free(d);
}
