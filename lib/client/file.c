// SPDX-License-Identifier: MIT
/*
 * file.c - open files: open/create with close-to-open revalidation, and the
 * commit points (flush, fsync, release) that publish this client's writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "frame.h"
#include "log.h"

/* The metaserver takes at most this many ranges in one COMMIT. */
#define COMMIT_MAX_RANGES	4096

/* @then: the size clock when the request @a answers left (attr_note()). */
static int file_new(struct rdfs_client *c, const struct rdfs_cred *cr, const Rdfs__Attr *a,
		    int flags, uint64_t handle, uint64_t gen, uint64_t then, struct rdfs_file **out)
{
	struct rdfs_file *f = calloc(1, sizeof(*f));
	struct rdfs_inode *in;

	if (!f)
		return -ENOMEM;
	in = inode_get(&c->itab, a->ino);
	if (!in) {
		free(f);
		return -ENOMEM;
	}
	f->c = c;
	f->in = in;
	f->flags = flags;
	if (cr)
		f->cred = *cr;
	f->handle = handle;
	f->handle_gen = gen;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->ra_lock, NULL);

	pthread_mutex_lock(&in->lock);
	f->lost_epoch = in->lost_epoch;
	in->open_count++;
	if ((flags & O_ACCMODE) != O_RDONLY)
		in->write_opens++;
	inode_note_ms_size(in, a->size, then);
	if (a->chunk_size)
		in->chunk_size = a->chunk_size;
	/*
	 * Close-to-open: what another client committed since we cached it counts
	 * now, unless our own uncommitted writes are newer than the metaserver
	 * (or a size we settled since the OPEN left).
	 */
	if (!in->dirty) {
		inode_drop_layout(in);
		inode_data_changed(in);
	}
	pthread_mutex_unlock(&in->lock);
	*out = f;
	return 0;
}

static void file_free(struct rdfs_file *f)
{
	struct rdfs_inode *in = f->in;

	readahead_drop(f);
	pthread_mutex_lock(&in->lock);
	in->open_count--;
	if ((f->flags & O_ACCMODE) != O_RDONLY)
		in->write_opens--;
	pthread_mutex_unlock(&in->lock);
	inode_put(&f->c->itab, in);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->ra_lock);
	free(f);
}

/* O_TRUNC: make sure the file is empty (the metaserver may have done it already). */
static int file_trunc(struct rdfs_file *f, struct stat *st)
{
	struct stat zero = { .st_size = 0 };

	if (!(f->flags & O_TRUNC) || (f->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	if (st->st_size == 0) {
		pthread_mutex_lock(&f->in->lock);
		inode_truncate_state(f->in, 0);
		range_set_clear(&f->in->uncommitted);
		f->in->dirty = 0;
		pthread_mutex_unlock(&f->in->lock);
		return 0;
	}
	return rdfs_setattr(f->c, &f->cred, f->in->ino, &zero, RDFS_SET_SIZE, f, st);
}

/* The open file an OPEN or open-creating MKNOD reply (@rep, freed here) describes. */
static int file_open_reply(struct rdfs_client *c, const struct rdfs_cred *cr,
			   ProtobufCMessage *rep, const Rdfs__Attr *attr, uint64_t handle,
			   int flags, uint64_t gen, uint64_t then, struct stat *st,
			   struct rdfs_file **out)
{
	struct rdfs_file *f;
	int ret;

	if (!attr) {
		protobuf_c_message_free_unpacked(rep, NULL);
		return -EPROTO;
	}
	ret = file_new(c, cr, attr, flags, handle, gen, then, &f);
	if (ret == 0)
		attr_note(c, attr, then, st);
	protobuf_c_message_free_unpacked(rep, NULL);
	if (ret)
		return ret;
	ret = file_trunc(f, st);
	if (ret) {
		rdfs_release(f);
		return ret;
	}
	*out = f;
	return 0;
}

int rdfs_open(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t ino, int flags,
	      struct stat *st, struct rdfs_file **out)
{
	Rdfs__OpenReq req = RDFS__OPEN_REQ__INIT;
	Rdfs__OpenReply *rep = NULL;
	Rdfs__Cred cred;
	struct stat tmp;
	uint64_t gen = 0, then;
	int ret;

	if (!st)
		st = &tmp;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.ino = ino;
	req.flags = flags;
	then = size_clock_now(c);
	ret = ms_call_gen(c, RDFS_OP_OPEN, &req.base, &rdfs__open_reply__descriptor, &rep, 0, &gen);
	if (ret)
		return ret;
	return file_open_reply(c, cr, &rep->base, rep->attr, rep->handle, flags, gen, then, st,
			       out);
}

int rdfs_create(struct rdfs_client *c, const struct rdfs_cred *cr, uint64_t parent,
		const char *name, mode_t mode, int flags, struct stat *st, struct rdfs_file **out)
{
	Rdfs__MknodReq req = RDFS__MKNOD_REQ__INIT;
	Rdfs__EntryReply *rep = NULL;
	Rdfs__Cred cred;
	struct stat tmp;
	uint64_t gen = 0, then;
	int ret = name_check(name);

	if (ret)
		return ret;
	if (!st)
		st = &tmp;
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	if (!S_ISREG(mode))
		return -EINVAL;
	cred_to_pb(cr, &cred);
	req.cred = &cred;
	req.parent = parent;
	req.name = (char *)name;
	req.mode = mode;
	req.umask = cr ? cr->umask : 0;
	req.exclusive = !!(flags & O_EXCL);
	req.open = 1;
	req.open_flags = flags;
	then = size_clock_now(c);
	ret = ms_call_gen(c, RDFS_OP_MKNOD, &req.base, &rdfs__entry_reply__descriptor, &rep, 0,
			  &gen);
	if (ret)
		return ret;
	dir_attr_note(c, rep->parent_attr);
	return file_open_reply(c, cr, &rep->base, rep->attr, rep->handle,
			       flags & ~(O_CREAT | O_EXCL), gen, then, st, out);
}

/* COMMIT this client's writes of @f's inode, if it has any. Under in->commit_lock. */
static int file_commit(struct rdfs_file *f)
{
	struct rdfs_inode *in = f->in;
	Rdfs__CommitReq req = RDFS__COMMIT_REQ__INIT;
	Rdfs__AttrReply *rep = NULL;
	Rdfs__BlockRange *ranges = NULL, **rangep = NULL;
	struct range_set snap;
	Rdfs__Cred cred;
	uint64_t inc_seq;
	size_t i;
	int ret;

	range_set_init(&snap);
	pthread_mutex_lock(&in->lock);
	if (!in->dirty) {
		pthread_mutex_unlock(&in->lock);
		return 0;
	}
	ret = range_set_merge(&snap, &in->uncommitted);
	req.size = in->pending_size;
	req.mtime_ns = in->mtime_ns;
	req.incarnation = in->layout_inc;
	inc_seq = in->layout_inc_seq;
	/*
	 * dirty stays set until the COMMIT is done: a getattr or open answered
	 * meanwhile may predate it, and must not take its size for ours.
	 */
	pthread_mutex_unlock(&in->lock);
	if (ret)
		goto fail;

	ranges = calloc(snap.n ? snap.n : 1, sizeof(*ranges));
	rangep = calloc(snap.n ? snap.n : 1, sizeof(*rangep));
	if (!ranges || !rangep) {
		ret = -ENOMEM;
		goto fail;
	}
	/* CommitReq.written holds file byte ranges: first = offset, count = length */
	for (i = 0; i < snap.n; i++) {
		rdfs__block_range__init(&ranges[i]);
		ranges[i].first = snap.r[i].start * BLK;
		ranges[i].count = (snap.r[i].end - snap.r[i].start) * BLK;
		rangep[i] = &ranges[i];
	}
	cred_to_pb(&f->cred, &cred);
	req.cred = &cred;
	req.ino = in->ino;
	/* COMMIT is idempotent (ranges and a size floor), so it may be sent again */
	i = 0;
	do {
		req.n_written = snap.n - i < COMMIT_MAX_RANGES ? snap.n - i : COMMIT_MAX_RANGES;
		req.written = rangep + i;
		i += req.n_written;
		if (rep)
			protobuf_c_message_free_unpacked(&rep->base, NULL);
		rep = NULL;
		ret = ms_file_call(f, RDFS_OP_COMMIT, &req.base, &req.handle,
				   &rdfs__attr_reply__descriptor, &rep, MS_IDEMPOTENT);
		if (ret == -ESTALE)
			goto lost;
		if (ret)
			goto fail;
	} while (i < snap.n);

	pthread_mutex_lock(&in->lock);
	/*
	 * Taken by the incarnation every noted layout came from, with none
	 * fetched since: their allocations are durable now.
	 */
	if (rep->incarnation && rep->incarnation == req.incarnation &&
	    in->layout_inc_seq == inc_seq)
		in->layout_inc = 0;
	for (i = 0; i < snap.n; i++)
		range_set_remove(&in->uncommitted, snap.r[i].start, snap.r[i].end);
	range_set_merge(&in->committed, &snap);
	in->commits++;
	inode_size_settled(f->c, in);
	/* writes (or a truncate) that came in during the COMMIT are for the next one */
	in->dirty = in->uncommitted.n || in->pending_size != req.size ||
		    in->mtime_ns != req.mtime_ns;
	if (req.size > in->ms_size)
		in->ms_size = req.size;
	if (rep->attr && rep->attr->ino == in->ino && !in->dirty && rep->attr->size >= in->ms_size)
		in->ms_size = rep->attr->size;
	pthread_mutex_unlock(&in->lock);
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	free(ranges);
	free(rangep);
	range_set_free(&snap);
	return 0;

lost:
	/*
	 * The metaserver restarted with its machine and lost the allocation of
	 * blocks written here (ESTALE): these writes are gone. Every open from
	 * before reports it; the layouts of that start are dropped, and later
	 * writes get new blocks.
	 */
	log_error(1600016, "ino=%llu: the metaserver lost the blocks of writes made before "
		  "its machine restarted; they are lost", (unsigned long long)in->ino);
	pthread_mutex_lock(&in->lock);
	for (i = 0; i < snap.n; i++)
		range_set_remove(&in->uncommitted, snap.r[i].start, snap.r[i].end);
	layout_cache_forget(&in->layout, 0, UINT64_MAX);
	in->layout_inc = 0;
	in->lost_epoch++;
	in->dirty = in->uncommitted.n != 0;
	pthread_mutex_unlock(&in->lock);
	free(ranges);
	free(rangep);
	range_set_free(&snap);
	return -EIO;

fail:
	log_warn(1600005, "cannot commit writes to ino=%llu: %s", (unsigned long long)in->ino,
		 strerror(-ret));
	pthread_mutex_lock(&in->lock);
	in->dirty = 1;
	pthread_mutex_unlock(&in->lock);
	free(ranges);
	free(rangep);
	range_set_free(&snap);
	return ret == -ENOMEM ? ret : (ret == -ENOSPC || ret == -EDQUOT ? ret : -EIO);
}

/* 1 if writes of @f's inode were lost since @f was opened. */
static int file_lost_writes(struct rdfs_file *f)
{
	int lost;

	pthread_mutex_lock(&f->in->lock);
	lost = f->lost_epoch != f->in->lost_epoch;
	pthread_mutex_unlock(&f->in->lock);
	return lost;
}

int rdfs_flush(struct rdfs_file *f)
{
	int ret, wb_err;

	/* a reader's close commits nothing: the writers' handles do (and may) */
	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return 0;
	/* write-behind first: what landed is committed even if some did not */
	wb_err = write_behind_drain(f->in, 1);
	/* a COMMIT in flight may not cover our writes yet: wait for it, then look */
	pthread_mutex_lock(&f->in->commit_lock);
	ret = file_commit(f);
	pthread_mutex_unlock(&f->in->commit_lock);
	if (wb_err)
		return wb_err;
	/* writes lost at an I/O server's restart are reported at close too */
	if (ret == 0 && file_lost_writes(f))
		ret = -EIO;
	return ret;
}

/* server_io_commit(): the server restarted since (the writes may be lost). */
#define COMMIT_VERIFIER_CHANGED	1

int io_commit_server(struct rdfs_client *c, uint32_t server_id, uint64_t *verifier)
{
	struct rdfs_peer *p = ios_peer(c, server_id, NULL);
	Rdfs__IoReply *rep = NULL;
	struct rdfs_conn *cn;
	int ret, attempt;

	if (!p)
		return -ENOMEM;
	/* a connection that broke since its last use (a restart, say) is replaced once */
	for (attempt = 0; attempt < 2; attempt++) {
		ret = peer_get(c, p, RDFS_IOS_CONNECT_MS, 0, &cn);
		if (ret)
			return ret;
		ret = rpc_call(cn->rpc, RDFS_OP_IO_COMMIT, NULL, &rdfs__io_reply__descriptor,
			       (ProtobufCMessage **)&rep, c->opts.timeout_ms);
		peer_put(p, cn);
		if (ret != -ENOTCONN)
			break;
	}
	if (ret)
		return ret;
	*verifier = rep->verifier;
	protobuf_c_message_free_unpacked(&rep->base, NULL);
	return 0;
}

/*
 * IO_COMMIT on server @u->server_id: 0 once the writes noted in @u are durable,
 * COMMIT_VERIFIER_CHANGED if the server restarted since (they may be lost),
 * else -errno.
 */
static int server_io_commit(struct rdfs_client *c, const struct unstable_server *u)
{
	uint64_t verifier;
	int ret = io_commit_server(c, u->server_id, &verifier);

	if (ret)
		return ret;
	return u->mixed || verifier != u->verifier ? COMMIT_VERIFIER_CHANGED : 0;
}

/*
 * IO_COMMIT on every server that holds unstable writes of @f's inode. A server
 * that restarted since some of them was acknowledged may have lost them: the
 * client no longer has the data, so the inode is marked as having lost writes
 * (NFS's write verifier), and every open of it from before reports -EIO.
 * Unless other copies hold those writes: then the copy on that server is
 * marked stale (file_copy_stale) and nothing is lost.
 */

/* Mark the copy on @u's server of every range @u wrote stale: 0 if the metaserver took all. */
static int file_copy_stale(struct rdfs_file *f, const struct unstable_server *u)
{
	int ret = 0;

	for (size_t i = 0; i < u->blocks.n && !ret; i++)
		ret = io_copy_stale(f->c, f->in, f, NULL, u->server_id, u->blocks.r[i].start,
				    u->blocks.r[i].end);
	if (ret == 0)
		log_warn(1600006,
			 "ino=%llu: I/O server %u lost or could not commit unstable writes; "
			 "other copies hold them, its copy is marked stale",
			 (unsigned long long)f->in->ino, u->server_id);
	return ret;
}

static int file_io_commit(struct rdfs_file *f)
{
	struct rdfs_client *c = f->c;
	struct rdfs_inode *in = f->in;
	struct unstable_server *servers;
	size_t n, i;
	int ret = 0;

	pthread_mutex_lock(&in->lock);
	servers = in->unstable;
	n = in->n_unstable;
	in->unstable = NULL;
	in->n_unstable = 0;
	pthread_mutex_unlock(&in->lock);

	for (i = 0; i < n; i++) {
		struct unstable_server *u = &servers[i];
		int r = server_io_commit(c, u);

		if (r && r != -ENOMEM && file_copy_stale(f, u) == 0)
			continue;
		if (r == COMMIT_VERIFIER_CHANGED) {
			log_error(1600007, "I/O server %u restarted before committing unstable writes of ino=%llu: they may be lost",
				  u->server_id, (unsigned long long)in->ino);
			pthread_mutex_lock(&in->lock);
			in->lost_epoch++;
			pthread_mutex_unlock(&in->lock);
			ret = -EIO;
		} else if (r) {
			log_warn(1600008,
				 "I/O server %u cannot commit ino=%llu: %s", u->server_id,
				 (unsigned long long)in->ino, strerror(-r));
			/* the next fsync tries again, still knowing the verifier */
			pthread_mutex_lock(&in->lock);
			inode_renote_unstable(in, u);
			pthread_mutex_unlock(&in->lock);
			ret = -EIO;
		}
	}
	unstable_servers_free(servers, n);
	return ret;
}

int rdfs_fsync(struct rdfs_file *f, int datasync)
{
	int ret;

	/* the writes still behind are part of what fsync makes durable */
	ret = write_behind_drain(f->in, 1);
	if (ret) {
		rdfs_flush(f);
		return ret;
	}
	/* data durable first: the metadata must never name blocks that could be lost */
	ret = file_io_commit(f);
	if (ret)
		return ret;
	if (file_lost_writes(f))
		return -EIO;
	return rdfs_flush(f);
}

int rdfs_release(struct rdfs_file *f)
{
	struct rdfs_client *c = f->c;
	Rdfs__ReleaseReq req = RDFS__RELEASE_REQ__INIT;
	struct rdfs_conn *cn;
	int ret, r;

	ret = rdfs_flush(f);
	/* a handle of a lost connection died with it: nothing to release */
	if (peer_get(c, &c->ms, c->opts.timeout_ms, 0, &cn) == 0) {
		if (cn->gen == f->handle_gen) {
			req.handle = f->handle;
			ms_count(c, RDFS_OP_RELEASE);
			r = rpc_call(cn->rpc, RDFS_OP_RELEASE, &req.base, NULL, NULL,
				     c->opts.timeout_ms);
			if (r && r != -ENOTCONN)
				log_debug(1600009, "release of ino=%llu: %s",
					  (unsigned long long)f->in->ino, strerror(-r));
		}
		peer_put(&c->ms, cn);
	}
	file_free(f);
	return ret;
}

uint64_t rdfs_file_ino(const struct rdfs_file *f)
{
	return f->in->ino;
}

int rdfs_file_flags(const struct rdfs_file *f)
{
	return f->flags;
}

int rdfs_file_written(const struct rdfs_file *f)
{
	return __atomic_load_n(&f->written, __ATOMIC_RELAXED);
}

uint64_t rdfs_file_size(const struct rdfs_file *f)
{
	uint64_t size;

	pthread_mutex_lock(&f->in->lock);
	size = inode_size(f->in);
	pthread_mutex_unlock(&f->in->lock);
	return size;
}

int rdfs_pending_size(struct rdfs_client *c, uint64_t ino, uint64_t *size)
{
	struct rdfs_inode *in = inode_find(&c->itab, ino);
	int ret = -ENOENT;

	*size = 0;
	if (!in)
		return ret;
	pthread_mutex_lock(&in->lock);
	if (in->write_opens > 0 || in->dirty) {
		*size = inode_size(in);
		ret = 0;
	}
	pthread_mutex_unlock(&in->lock);
	inode_put(&c->itab, in);
	return ret;
}
