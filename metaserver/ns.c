// SPDX-License-Identifier: MIT
/*
 * ns.c - the metadata database: opening it (root inode on a new one, allocation
 * maps and orphan reclaim on every start), inode and dirent records, inode
 * number allocation and the synced batch write every mutation ends with.
 *
 * Group commit: every mutating operation writes one batch with sync=1 from its
 * worker thread through group_commit.c, which writes the batches of writers
 * that arrive together as one, with one fsync, and counts them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "ms_int.h"

/* Inode numbers are reserved in runs so the counter is written once per run. */
#define INO_RESERVE	4096

static const uint8_t key_format[] = { MS_TAG_FORMAT, 'f', 'o', 'r', 'm', 'a', 't' };
static const uint8_t key_ino_counter[] = { MS_TAG_COUNTER, 'i', 'n', 'o' };

int64_t ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ns_get(struct ms *ms, const uint8_t *key, size_t klen, char **val, size_t *vlen)
{
	char *err = NULL;

	*val = leveldb_get(ms->db, ms->ropts, (const char *)key, klen, vlen, &err);
	if (err) {
		log_error(1100030, "leveldb get: %s", err);
		leveldb_free(err);
		return -EIO;
	}
	return *val ? 0 : -ENOENT;
}

int ns_inode_lock_get(struct ms *ms, struct ms_lockset *ls, uint64_t ino, struct ms_inode *in)
{
	lockset_init(ls);
	lockset_add(ls, ino);
	lockset_lock(&ms->locks, ls);
	return ns_inode_get(ms, ino, in);
}

int ns_inode_get(struct ms *ms, uint64_t ino, struct ms_inode *out)
{
	uint8_t k[MS_KEY_MAX];
	char *v;
	size_t vlen;
	int ret;

	if (ino == 0)
		return -ENOENT;
	ret = ns_get(ms, k, key_inode(k, ino), &v, &vlen);
	if (ret)
		return ret;
	ret = inode_decode(ino, v, vlen, out);
	leveldb_free(v);
	if (ret) {
		log_error(1100031, "ino=%llu: corrupt record", (unsigned long long)ino);
		return ret;
	}
	/* the only extra read of a permission check, and only with an ACL */
	if (out->flags & MS_INO_ACL)
		ret = ns_acl_load(ms, ino, MS_ACL_XATTR_ACCESS, &out->acl);
	return ret;
}

void ns_inode_put(struct ms_batch *mb, struct ms_inode *in)
{
	uint8_t k[MS_KEY_MAX], v[MS_INODE_MAX];
	size_t klen = key_inode(k, in->ino);
	size_t vlen = inode_encode(in, v);

	quota_note_inode(mb, in, 0);
	leveldb_writebatch_put(mb->b, (char *)k, klen, (char *)v, vlen);
}

int ns_dirent_get(struct ms *ms, uint64_t parent, const char *name, uint64_t *ino,
		  uint32_t *type)
{
	uint8_t k[MS_KEY_MAX];
	char *v;
	size_t vlen;
	int ret;

	ret = ns_get(ms, k, key_dirent(k, parent, name, strlen(name)), &v, &vlen);
	if (ret)
		return ret;
	ret = dirent_decode(v, vlen, ino, type);
	leveldb_free(v);
	return ret;
}

void ns_dirent_put(leveldb_writebatch_t *b, uint64_t parent, const char *name, uint64_t ino,
		   uint32_t type)
{
	uint8_t k[MS_KEY_MAX], v[MS_DIRENT_VAL];
	size_t klen = key_dirent(k, parent, name, strlen(name));

	dirent_encode(ino, type, v);
	leveldb_writebatch_put(b, (char *)k, klen, (char *)v, sizeof(v));
}

void ns_dirent_del(leveldb_writebatch_t *b, uint64_t parent, const char *name)
{
	uint8_t k[MS_KEY_MAX];

	leveldb_writebatch_delete(b, (char *)k, key_dirent(k, parent, name, strlen(name)));
}

int ns_write(struct ms *ms, struct ms_batch *mb)
{
	int ret = mb->err ? mb->err : group_commit_write(ms, mb);

	quota_batch_written(mb, ret);
	return ret;
}

int ns_write_plain(struct ms *ms, leveldb_writebatch_t *b)
{
	struct ms_batch mb = { .b = b };

	return group_commit_write(ms, &mb);
}

static int put_sync(struct ms *ms, const uint8_t *k, size_t klen, const void *v, size_t vlen)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	int ret;

	leveldb_writebatch_put(b, (const char *)k, klen, v, vlen);
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	return ret;
}

int ns_alloc_ino(struct ms *ms, uint64_t *ino)
{
	int ret = 0;

	pthread_mutex_lock(&ms->ino_mu);
	if (ms->next_ino >= ms->ino_limit) {
		uint8_t v[8];
		uint64_t limit = ms->next_ino + INO_RESERVE;

		put_le64(v, limit);
		ret = put_sync(ms, key_ino_counter, sizeof(key_ino_counter), v, 8);
		if (!ret)
			ms->ino_limit = limit;
	}
	if (!ret)
		*ino = ms->next_ino++;
	pthread_mutex_unlock(&ms->ino_mu);
	return ret;
}

void ns_attr_from_inode(const struct ms_inode *in, struct ms_attr *out)
{
	if (!out)
		return;
	out->ino = in->ino;
	out->mode = in->mode;
	out->nlink = in->nlink;
	out->uid = in->uid;
	out->gid = in->gid;
	out->size = in->size;
	out->blocks = in->blocks;
	out->atime_ns = in->atime_ns;
	out->mtime_ns = in->mtime_ns;
	out->ctime_ns = in->ctime_ns;
	out->rdev = in->rdev;
	out->chunk_size = in->chunk_size;
	out->stripe_start = in->stripe_start;
}

int ns_check_name(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return -ENOENT;
	if (len > 255)
		return -ENAMETOOLONG;
	if (strchr(name, '/'))
		return -EINVAL;
	return 0;
}

int ns_dir_has_entries(struct ms *ms, uint64_t ino)
{
	uint8_t k[MS_KEY_MAX];
	size_t klen = key_prefix(k, MS_TAG_DIRENT, ino);
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	int ret = 0;

	leveldb_iter_seek(it, (char *)k, klen);
	if (leveldb_iter_valid(it)) {
		size_t l;
		const char *key = leveldb_iter_key(it, &l);

		ret = l >= klen && memcmp(key, k, klen) == 0;
	}
	leveldb_iter_destroy(it);
	return ret;
}

/* ---------------------------------------------------------------- freeing */

void freelist_add(struct ms_freelist *f, uint32_t server, uint64_t block, uint64_t count)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct ms_ext *e = realloc(f->e, cap * sizeof(*e));

		if (!e)
			return;	/* the blocks leak until the next restart's rebuild */
		f->e = e;
		f->cap = cap;
	}
	f->e[f->n].server_id = server;
	f->e[f->n].block = block;
	f->e[f->n].count = (uint32_t)count;
	f->n++;
}

int ns_write_freeing(struct ms *ms, struct ms_batch *mb, struct ms_freelist *f)
{
	if (f->n && !f->busy) {
		pthread_rwlock_rdlock(&ms->blocks_rw);
		f->busy = 1;
	}
	return ns_write(ms, mb);
}

void freelist_release(struct ms *ms, struct ms_freelist *f, int commit)
{
	int queued = 0;

	/*
	 * A capability of the file may still name them: fenced first (fence.c),
	 * after the reply when the file is gone for good and freeing is async
	 * (freeing.c, which forgets its generation after the fence).
	 */
	if (commit && f->n && f->inodes && f->busy &&
	    freeing_queue(ms, f->ino, f->e, f->n) == 0) {
		queued = 1;
		f->e = NULL;
		f->n = f->cap = 0;
	}
	if (commit && f->n)
		fence_and_free(ms, f->ino, f->e, f->n);
	if (f->busy)
		pthread_rwlock_unlock(&ms->blocks_rw);
	f->busy = 0;
	if (commit && f->inodes) {
		atomic_fetch_sub(&ms->nfiles, f->inodes);
		if (!queued)
			gens_forget(ms, f->ino);
	}
	free(f->e);
	f->e = NULL;
	f->n = f->cap = 0;
	f->ino = 0;
	f->inodes = 0;
}

/* Delete every key that starts with @tag ino:be64 into @b; with @f, chunk records' blocks go to @f. */
static int delete_prefixed(struct ms *ms, leveldb_writebatch_t *b, char tag, uint64_t ino,
			   struct ms_freelist *f)
{
	uint8_t k[MS_KEY_MAX];
	size_t klen = key_prefix(k, tag, ino);
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	struct ms_ext ext[1024];
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)k, klen); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t l, vl;
		const char *key = leveldb_iter_key(it, &l);

		if (l < klen || memcmp(key, k, klen))
			break;
		if (f) {
			const char *v = leveldb_iter_value(it, &vl);
			size_t off = 0;

			/* Chunk records may exceed ext[]; decode in slices. */
			while (off < vl) {
				size_t take = vl - off;
				int n;

				if (take > sizeof(ext) / sizeof(ext[0]) * MS_EXTENT_REC)
					take = sizeof(ext) / sizeof(ext[0]) * MS_EXTENT_REC;
				n = chunk_decode(v + off, take, ext, 1024);
				if (n < 0) {
					ret = n;
					break;
				}
				for (int i = 0; i < n; i++)
					freelist_add(f, ext[i].server_id, ext[i].block, ext[i].count);
				off += take;
			}
		}
		leveldb_writebatch_delete(b, key, l);
	}
	leveldb_iter_destroy(it);
	return ret;
}

int ns_inode_purge(struct ms *ms, struct ms_batch *mb, uint64_t ino, struct ms_inode *in,
		   int flags, struct ms_freelist *f)
{
	leveldb_writebatch_t *b = mb->b;
	uint8_t k[MS_KEY_MAX];
	int ret = 0;

	leveldb_writebatch_delete(b, (char *)k, key_inode(k, ino));
	if (in)
		quota_note_inode(mb, in, 1);
	/* not otherwise: a tombstone of a key never written only slows later scans */
	if (flags & NS_PURGE_ORPHAN)
		leveldb_writebatch_delete(b, (char *)k, key_orphan(k, ino));
	f->ino = ino;
	f->inodes++;
	if (!in || in->blocks || (flags & NS_PURGE_SCAN))
		ret = delete_prefixed(ms, b, MS_TAG_LAYOUT, ino, f);
	if (!ret)
		ret = delete_prefixed(ms, b, MS_TAG_XATTR, ino, NULL);
	return ret;
}

int ns_inode_unlinked(struct ms *ms, struct ms_batch *mb, struct ms_inode *in,
		      struct ms_freelist *f)
{
	uint8_t k[MS_KEY_MAX];

	if (opentab_count(&ms->opentab, in->ino) > 0) {
		ns_inode_put(mb, in);
		leveldb_writebatch_put(mb->b, (char *)k, key_orphan(k, in->ino), "", 0);
		return 0;
	}
	return ns_inode_purge(ms, mb, in->ino, in, 0, f);
}

/* ---------------------------------------------------------------- open / close */

static int ms_init_new(struct ms *ms)
{
	struct ms_batch mb;
	leveldb_writebatch_t *b;
	struct ms_inode root;
	uint8_t v[8];
	int64_t now = ns_now();
	int ret;

	ms_batch_init(&mb);
	b = mb.b;

	memset(&root, 0, sizeof(root));
	root.ino = MS_ROOT_INO;
	root.mode = S_IFDIR | 0755;
	root.nlink = 2;
	root.parent = MS_ROOT_INO;
	root.chunk_size = ms->chunk_size;
	root.atime_ns = root.mtime_ns = root.ctime_ns = now;
	ns_inode_put(&mb, &root);
	put_le32(v, MS_FORMAT_VERSION);
	leveldb_writebatch_put(b, (const char *)key_format, sizeof(key_format), (char *)v, 4);
	put_le64(v, 2);
	leveldb_writebatch_put(b, (const char *)key_ino_counter, sizeof(key_ino_counter),
			       (char *)v, 8);
	/* usage records count every inode from the first one on */
	quota_put_format(b);
	ret = ns_write(ms, &mb);
	ms_batch_destroy(ms, &mb);
	return ret;
}

/* Count inodes and reclaim orphans (nlink 0, found through their 'O' keys). */
static int ms_scan_inodes(struct ms *ms)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	uint8_t tag = MS_TAG_INODE;
	uint64_t n = 0;
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t l;
		const char *key = leveldb_iter_key(it, &l);

		if (l == 0 || key[0] != MS_TAG_INODE)
			break;
		n++;
	}
	atomic_store(&ms->nfiles, n);

	tag = MS_TAG_ORPHAN;
	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t l;
		const uint8_t *key = (const uint8_t *)leveldb_iter_key(it, &l);
		struct ms_batch mb;
		struct ms_freelist f = { 0 };
		struct ms_inode in;
		uint64_t ino;
		int got;

		if (l != 9 || key[0] != MS_TAG_ORPHAN)
			break;
		ino = get_be64(key + 1);
		ms_batch_init(&mb);
		got = ns_inode_get(ms, ino, &in) == 0;
		if (got && in.nlink > 0) {
			/* relinked before the crash? cannot happen, but never drop a linked inode */
			leveldb_writebatch_delete(mb.b, (const char *)key, l);
		} else {
			/* the record may be gone or unreadable: search every prefix */
			ns_inode_purge(ms, &mb, ino, got ? &in : NULL,
				       NS_PURGE_ORPHAN | NS_PURGE_SCAN, &f);
			log_info(1100032, "reclaimed orphan ino=%llu", (unsigned long long)ino);
		}
		ret = ns_write_freeing(ms, &mb, &f);
		ms_batch_destroy(ms, &mb);
		freelist_release(ms, &f, ret == 0);
		if (ret)
			break;
	}
	leveldb_iter_destroy(it);
	return ret;
}

int ms_open(const struct ms_options *o, struct ms **out, char *errbuf, size_t errlen)
{
	struct ms *ms = calloc(1, sizeof(*ms));
	char *err = NULL, *v;
	size_t vlen;
	int ret;

	if (!ms) {
		snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	ms->chunk_size = o->chunk_size ? o->chunk_size : MS_DEFAULT_CHUNK;
	ms->default_copies = o->default_copies ? o->default_copies : 1;
	ms->rebuild_grace_ms = o->rebuild_grace_ms;
	ms->rebuild_rate = o->rebuild_rate;
	pthread_mutex_init(&ms->rebuild_mu, NULL);
	pthread_mutex_init(&ms->rebalance_mu, NULL);
	locks_init(&ms->locks);
	pthread_mutex_init(&ms->rename_mu, NULL);
	pthread_mutex_init(&ms->ino_mu, NULL);
	group_commit_init(&ms->gc);
	quotas_init(&ms->quotas);
	pthread_mutex_init(&ms->reg.mu, NULL);
	pthread_mutex_init(&ms->nodes.mu, NULL);
	gens_init(&ms->gens);
	freeing_init(&ms->freeing);
	pthread_mutex_init(&ms->high_mu, NULL);
	{
		pthread_rwlockattr_t ra;

		/* fsck must get its moment on a busy server */
		pthread_rwlockattr_init(&ra);
		pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&ms->blocks_rw, &ra);
		pthread_rwlockattr_destroy(&ra);
	}
	quarantine_init(&ms->quarantine);
	pthread_mutex_init(&ms->fsck_mu, NULL);
	alloc_init(&ms->alloc);
	opentab_init(&ms->opentab);
	atomic_store(&ms->next_handle, 1);

	ms->opts = leveldb_options_create();
	ms->cache = leveldb_cache_create_lru(o->cache_bytes ? o->cache_bytes : (32u << 20));
	ms->filter = leveldb_filterpolicy_create_bloom(10);
	leveldb_options_set_create_if_missing(ms->opts, 1);
	leveldb_options_set_cache(ms->opts, ms->cache);
	leveldb_options_set_filter_policy(ms->opts, ms->filter);
	leveldb_options_set_write_buffer_size(ms->opts, 16u << 20);
	ms->ropts = leveldb_readoptions_create();
	ms->wsync = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(ms->wsync, 1);
	ms->wnosync = leveldb_writeoptions_create();
	do {
		if (getrandom(&ms->incarnation, sizeof(ms->incarnation), 0) !=
		    sizeof(ms->incarnation))
			ms->incarnation = (uint64_t)ns_now() ^ ((uint64_t)getpid() << 32);
	} while (ms->incarnation == 0 || ms->incarnation == RDFS_INCARNATION_MIXED);

	ms->db = leveldb_open(ms->opts, o->db_dir, &err);
	if (err) {
		if (strstr(err, "lock") || strstr(err, "LOCK")) {
			snprintf(errbuf, errlen,
				 "database %s is in use by another process (another rdfs-metaserver?): %s",
				 o->db_dir, err);
			ret = -EBUSY;
		} else {
			snprintf(errbuf, errlen, "cannot open database %s: %s", o->db_dir, err);
			ret = -EIO;
		}
		leveldb_free(err);
		ms->db = NULL;
		goto fail;
	}

	ret = ns_get(ms, key_format, sizeof(key_format), &v, &vlen);
	if (ret == -ENOENT) {
		ret = ms_init_new(ms);
		if (ret) {
			snprintf(errbuf, errlen, "cannot initialize database %s", o->db_dir);
			goto fail;
		}
	} else if (ret) {
		snprintf(errbuf, errlen, "cannot read database %s", o->db_dir);
		goto fail;
	} else {
		uint32_t ver = vlen == 4 ? get_le32((uint8_t *)v) : 0;

		leveldb_free(v);
		if (ver != MS_FORMAT_VERSION) {
			snprintf(errbuf, errlen, "database %s has format %u, this program reads %u",
				 o->db_dir, ver, MS_FORMAT_VERSION);
			ret = -EINVAL;
			goto fail;
		}
	}

	ret = ns_get(ms, key_ino_counter, sizeof(key_ino_counter), &v, &vlen);
	if (ret || vlen != 8) {
		if (!ret)
			leveldb_free(v);
		snprintf(errbuf, errlen, "database %s: inode counter missing or corrupt", o->db_dir);
		ret = -EIO;
		goto fail;
	}
	ms->next_ino = ms->ino_limit = get_le64((uint8_t *)v);
	leveldb_free(v);

	ret = registry_load(ms);
	if (!ret)
		ret = rebalance_load(ms);
	if (!ret)
		ret = nodes_load(ms);
	if (!ret)
		ret = high_water_load(ms);
	if (!ret)
		ret = layout_rebuild_bitmaps(ms);
	if (!ret)
		ret = high_water_settle(ms);
	/* before the orphans go: their usage leaves the loaded records */
	if (!ret)
		ret = quota_load(ms);
	if (!ret)
		ret = ms_scan_inodes(ms);
	if (!ret)
		registry_start_wait(&ms->reg, o->startup_wait_ms);
	if (ret) {
		snprintf(errbuf, errlen, "database %s: cannot load: %s", o->db_dir, strerror(-ret));
		goto fail;
	}
	*out = ms;
	return 0;
fail:
	ms_close(ms);
	return ret;
}

void ms_close(struct ms *ms)
{
	if (!ms)
		return;
	/* the queue needs the registry and the maps */
	ms_set_freeing_async(ms, 0);
	if (ms->db)
		leveldb_close(ms->db);
	leveldb_options_destroy(ms->opts);
	leveldb_cache_destroy(ms->cache);
	leveldb_filterpolicy_destroy(ms->filter);
	leveldb_readoptions_destroy(ms->ropts);
	leveldb_writeoptions_destroy(ms->wsync);
	leveldb_writeoptions_destroy(ms->wnosync);
	registry_destroy(&ms->reg);
	nodes_destroy(&ms->nodes);
	freeing_destroy(&ms->freeing);
	gens_destroy(&ms->gens);
	quarantine_destroy(&ms->quarantine);
	pthread_rwlock_destroy(&ms->blocks_rw);
	pthread_mutex_destroy(&ms->fsck_mu);
	alloc_destroy(&ms->alloc);
	pthread_mutex_destroy(&ms->high_mu);
	pthread_mutex_destroy(&ms->rebuild_mu);
	pthread_mutex_destroy(&ms->rebalance_mu);
	opentab_destroy(&ms->opentab);
	locks_destroy(&ms->locks);
	pthread_mutex_destroy(&ms->rename_mu);
	pthread_mutex_destroy(&ms->ino_mu);
	group_commit_destroy(&ms->gc);
	quotas_destroy(&ms->quotas);
	free(ms);
}

int ms_getattr(struct ms *ms, uint64_t ino, struct ms_attr *out)
{
	struct ms_inode in;
	int ret = ns_inode_get(ms, ino, &in);

	if (!ret)
		ns_attr_from_inode(&in, out);
	return ret;
}

int ms_statfs(struct ms *ms, struct ms_statfs *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&ms->alloc.mu);
	for (int i = 0; i < ms->alloc.n; i++) {
		out->total_blocks += ms->alloc.vols[i].capacity;
		out->free_blocks += ms->alloc.vols[i].capacity - ms->alloc.vols[i].used;
	}
	pthread_mutex_unlock(&ms->alloc.mu);
	out->files = atomic_load(&ms->nfiles);
	out->free_files = out->files < (1ull << 32) ? (1ull << 32) - out->files : 0;
	return 0;
}
