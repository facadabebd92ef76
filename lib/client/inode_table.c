// SPDX-License-Identifier: MIT
/*
 * inode_table.c - per-file state shared by every open of one file in this
 * client: the layout cache, the size including uncommitted writes, and the
 * block ranges this client wrote that others cannot see yet. An entry lives
 * while a file is open here or while it holds uncommitted writes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "log.h"

void inode_table_init(struct inode_table *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

static void inode_free(struct rdfs_inode *in)
{
	layout_cache_free(&in->layout);
	range_set_free(&in->uncommitted);
	range_set_free(&in->committed);
	unstable_servers_free(in->unstable, in->n_unstable);
	write_behind_free(in);
	pthread_mutex_destroy(&in->wb_lock);
	pthread_mutex_destroy(&in->lock);
	pthread_mutex_destroy(&in->append_lock);
	pthread_mutex_destroy(&in->commit_lock);
	free(in);
}

void inode_table_destroy(struct inode_table *t)
{
	size_t i;

	for (i = 0; i < INODE_BUCKETS; i++) {
		while (t->bucket[i]) {
			struct rdfs_inode *in = t->bucket[i];

			/* only a failed release leaves these; say what is lost */
			if (in->dirty)
				log_warn(1600010, "ino=%llu: uncommitted writes discarded as the client closes",
					 (unsigned long long)in->ino);
			t->bucket[i] = in->next;
			inode_free(in);
		}
	}
	pthread_mutex_destroy(&t->lock);
}

static struct rdfs_inode **inode_slot(struct inode_table *t, uint64_t ino)
{
	struct rdfs_inode **pp = &t->bucket[(ino * 0x9E3779B97F4A7C15ull) >> 56];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

struct rdfs_inode *inode_find(struct inode_table *t, uint64_t ino)
{
	struct rdfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = *inode_slot(t, ino);
	if (in)
		in->refs++;
	pthread_mutex_unlock(&t->lock);
	return in;
}

struct rdfs_inode *inode_get(struct inode_table *t, uint64_t ino)
{
	struct rdfs_inode **pp, *in;

	pthread_mutex_lock(&t->lock);
	pp = inode_slot(t, ino);
	in = *pp;
	if (in) {
		in->refs++;
	} else {
		in = calloc(1, sizeof(*in));
		if (in) {
			in->ino = ino;
			in->refs = 1;
			pthread_mutex_init(&in->lock, NULL);
			pthread_mutex_init(&in->append_lock, NULL);
			pthread_mutex_init(&in->commit_lock, NULL);
			pthread_mutex_init(&in->wb_lock, NULL);
			range_set_init(&in->uncommitted);
			range_set_init(&in->committed);
			layout_cache_init(&in->layout);
			*pp = in;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return in;
}

void inode_put(struct inode_table *t, struct rdfs_inode *in)
{
	struct rdfs_inode **pp;
	int gone = 0;

	pthread_mutex_lock(&in->lock);
	pthread_mutex_lock(&t->lock);
	if (--in->refs == 0 && in->open_count == 0 && !in->dirty && !in->wb_end) {
		pp = inode_slot(t, in->ino);
		if (*pp == in)
			*pp = in->next;
		gone = 1;
	}
	pthread_mutex_unlock(&t->lock);
	pthread_mutex_unlock(&in->lock);
	if (gone)
		inode_free(in);
}

int inode_block_written_here(const struct rdfs_inode *in, uint64_t start, uint64_t end)
{
	struct range r;
	uint64_t b = start;

	/* every block of [start, end) in one of the two sets */
	while (b < end) {
		if (range_set_next(&in->uncommitted, b, b + 1, &r) ||
		    range_set_next(&in->committed, b, b + 1, &r)) {
			b++;
			continue;
		}
		return 0;
	}
	return 1;
}

uint64_t inode_size(const struct rdfs_inode *in)
{
	uint64_t size = in->pending_size > in->ms_size ? in->pending_size : in->ms_size;

	return in->wb_end > size ? in->wb_end : size;
}

uint64_t size_clock_now(struct rdfs_client *c)
{
	return __atomic_load_n(&c->size_clock, __ATOMIC_ACQUIRE);
}

void inode_size_settled(struct rdfs_client *c, struct rdfs_inode *in)
{
	in->size_clock = __atomic_add_fetch(&c->size_clock, 1, __ATOMIC_ACQ_REL);
}

int inode_note_ms_size(struct rdfs_inode *in, uint64_t size, uint64_t then)
{
	if (in->size_clock > then)
		return 0;
	in->ms_size = size;
	if (!in->dirty)
		in->pending_size = size;
	return 1;
}

void inode_data_changed(struct rdfs_inode *in)
{
	__atomic_add_fetch(&in->data_gen, 1, __ATOMIC_RELEASE);
}

void inode_truncate_state(struct rdfs_inode *in, uint64_t size)
{
	uint64_t first_gone = BLK_UP(size);

	range_set_remove(&in->uncommitted, first_gone, UINT64_MAX);
	range_set_remove(&in->committed, first_gone, UINT64_MAX);
	/* the truncate fenced the file (its layout generation moved on): all of it */
	layout_cache_forget(&in->layout, 0, UINT64_MAX);
	in->pending_size = size;
	in->ms_size = size;
	inode_data_changed(in);
}

void inode_drop_layout(struct rdfs_inode *in)
{
	layout_cache_forget(&in->layout, 0, UINT64_MAX);
	/* the next layout tells which of our committed blocks are written */
	range_set_clear(&in->committed);
}

int inode_note_unstable(struct rdfs_inode *in, uint32_t server_id, uint64_t verifier,
			int mixed, uint64_t b0, uint64_t b1)
{
	struct unstable_server *grown, *u;
	size_t i;

	for (i = 0; i < in->n_unstable; i++) {
		u = &in->unstable[i];
		if (u->server_id != server_id)
			continue;
		if (mixed || u->verifier != verifier)
			u->mixed = 1;
		return range_set_add(&u->blocks, b0, b1);
	}
	grown = realloc(in->unstable, (in->n_unstable + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	in->unstable = grown;
	u = &in->unstable[in->n_unstable++];
	*u = (struct unstable_server){
		.server_id = server_id, .verifier = verifier, .mixed = mixed,
	};
	range_set_init(&u->blocks);
	return range_set_add(&u->blocks, b0, b1);
}

int inode_renote_unstable(struct rdfs_inode *in, const struct unstable_server *u)
{
	int ret = 0;

	for (size_t i = 0; i < u->blocks.n && !ret; i++)
		ret = inode_note_unstable(in, u->server_id, u->verifier, u->mixed,
					  u->blocks.r[i].start, u->blocks.r[i].end);
	return ret;
}

void unstable_servers_free(struct unstable_server *u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		range_set_free(&u[i].blocks);
	free(u);
}
