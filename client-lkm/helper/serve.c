// SPDX-License-Identifier: MIT
/*
 * serve.c - answer the kernel module's requests on /dev/rdfs with lib/client.
 *
 * Namespace operations map one to one onto rdfs_client.h. LAYOUT and COMMIT
 * reach into the client core (client_internal.h): the module moves the data
 * itself, so the helper hands out the cached layout with its capabilities and
 * records the blocks the module wrote, then commits them as rdfs-fuse would.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cap.h"
#include "client_internal.h"
#include "helper.h"
#include "log.h"
#include "rdfs_dev_abi.h"

#define HANDLE_FILE	1
#define HANDLE_DIR	2

_Static_assert(RDFS_DEV_MAX_GROUPS <= RDFS_MAX_GROUPS, "a request's groups fit a struct rdfs_cred");

struct msg {
	struct helper *h;
	const struct rdfs_dev_req *req;
	const uint8_t *in;		/* payload */
	size_t in_len;
	uint8_t *out;			/* reply payload */
	size_t out_len;
	struct rdfs_dev_reply *rep;
	struct rdfs_cred cred;
	size_t held[2];			/* slots whose handles it uses (handle_get) */
	int nheld;
};

static uint64_t handle_new(struct helper *h, void *p, int type)
{
	size_t i;
	struct helper_handle *grown;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nhandles; i++)
		if (!h->handles[i].p)
			goto found;
	grown = realloc(h->handles, (h->nhandles + 64) * sizeof(*grown));
	if (!grown) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	memset(grown + h->nhandles, 0, 64 * sizeof(*grown));
	h->handles = grown;
	i = h->nhandles;
	h->nhandles += 64;
found:
	h->handles[i] = (struct helper_handle){ .p = p, .type = type };
	pthread_mutex_unlock(&h->lock);
	return ((uint64_t)(i + 1) << 2) | type;
}

/* Under h->lock: the slot of @handle if it is of @type and open, else NULL. */
static struct helper_handle *handle_slot(struct helper *h, uint64_t handle, int type)
{
	size_t i = (handle >> 2) - 1;

	if ((handle & 3) != (uint64_t)type || !(handle >> 2) || i >= h->nhandles ||
	    !h->handles[i].p || h->handles[i].released)
		return NULL;
	return &h->handles[i];
}

static int handle_close(void *p, int type)
{
	if (type == HANDLE_FILE)
		return rdfs_release(p);
	rdfs_closedir(p);
	return 0;
}

/*
 * The file or directory of @handle for the request @m, or NULL; it stays
 * open until the request is answered (handles_put), a RELEASE meanwhile or not.
 */
static void *handle_get(struct msg *m, uint64_t handle, int type)
{
	struct helper *h = m->h;
	struct helper_handle *s;
	void *p = NULL;

	if (m->nheld == (int)(sizeof(m->held) / sizeof(m->held[0])))
		return NULL;
	pthread_mutex_lock(&h->lock);
	s = handle_slot(h, handle, type);
	if (s) {
		s->refs++;
		m->held[m->nheld++] = (size_t)(s - h->handles);
		p = s->p;
	}
	pthread_mutex_unlock(&h->lock);
	return p;
}

/* The request is answered: what it used is let go, closed if it was released meanwhile. */
static void handles_put(struct msg *m)
{
	struct helper *h = m->h;

	for (int k = 0; k < m->nheld; k++) {
		struct helper_handle *s, closing = { 0 };
		int err;

		pthread_mutex_lock(&h->lock);
		s = &h->handles[m->held[k]];
		if (--s->refs == 0 && s->released) {
			closing = *s;
			*s = (struct helper_handle){ 0 };
		}
		pthread_mutex_unlock(&h->lock);
		if (closing.p && (err = handle_close(closing.p, closing.type)))
			log_warn(1400009, "ino=%llu: release after its last request: %s",
				 (unsigned long long)m->req->ino, strerror(-err));
	}
	m->nheld = 0;
}

/*
 * RELEASE(DIR) of @handle: 0 once it is closed or will be when the last
 * request using it is answered, -EBADF if it is not open; a close now gives
 * rdfs_release's error.
 */
static int handle_release(struct helper *h, uint64_t handle, int type)
{
	struct helper_handle *s;
	void *p = NULL;

	pthread_mutex_lock(&h->lock);
	s = handle_slot(h, handle, type);
	if (s) {
		s->released = 1;
		if (!s->refs) {
			p = s->p;
			*s = (struct helper_handle){ 0 };
		}
	}
	pthread_mutex_unlock(&h->lock);
	if (!s)
		return -EBADF;
	return p ? handle_close(p, type) : 0;
}

/*
 * The open file of a data-path request (LAYOUT, COMMIT, FSYNC, COPY_LOST),
 * which names its inode too: a handle the module kept past its release may
 * have been given to another file's open since, and must not reach that
 * file's blocks.
 */
static struct rdfs_file *data_file_get(struct msg *m)
{
	struct rdfs_file *f = handle_get(m, m->req->handle, HANDLE_FILE);

	return f && f->in->ino == m->req->ino ? f : NULL;
}

/* The @n-th NUL-terminated string of the payload after @skip bytes, or NULL. */
static const char *arg_str(struct msg *m, size_t skip, int n)
{
	const char *p = (const char *)m->in + skip, *end = (const char *)m->in + m->in_len;

	if (skip > m->in_len)
		return NULL;
	for (;;) {
		const char *nul = memchr(p, '\0', end - p);

		if (!nul)
			return NULL;
		if (!n--)
			return p;
		p = nul + 1;
	}
}

static void stat_to_attr(const struct stat *st, struct rdfs_dev_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = st->st_ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	a->atime_ns = st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
	a->mtime_ns = st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
	a->ctime_ns = st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = st->st_rdev;
	a->blksize = st->st_blksize;
}

static int reply_attr(struct msg *m, const struct stat *st)
{
	stat_to_attr(st, (struct rdfs_dev_attr *)m->out);
	m->out_len = sizeof(struct rdfs_dev_attr);
	return 0;
}

static int op_entry(struct msg *m)
{
	const struct rdfs_dev_req *r = m->req;
	struct rdfs_client *c = m->h->client;
	const struct rdfs_dev_mknod *mk = (const void *)m->in;
	const struct rdfs_dev_rename *rn = (const void *)m->in;
	const char *name, *name2;
	struct stat st;
	int err;

	switch (r->op) {
	case RDFS_DEV_LOOKUP:
		if (!(name = arg_str(m, 0, 0)))
			return -EINVAL;
		err = rdfs_lookup(c, &m->cred, r->ino, name, &st);
		break;
	case RDFS_DEV_GETATTR:
		err = rdfs_getattr(c, &m->cred, r->ino, &st);
		break;
	case RDFS_DEV_CREATE:
	case RDFS_DEV_MKNOD:
	case RDFS_DEV_MKDIR:
		if (m->in_len < sizeof(*mk) || !(name = arg_str(m, sizeof(*mk), 0)))
			return -EINVAL;
		/* the metaserver applies it unless the parent has a default ACL */
		m->cred.umask = mk->umask & 0777;
		if (r->op == RDFS_DEV_MKDIR)
			err = rdfs_mkdir(c, &m->cred, r->ino, name, mk->mode, &st);
		else
			err = rdfs_mknod(c, &m->cred, r->ino, name, mk->mode, mk->rdev, &st);
		break;
	case RDFS_DEV_SYMLINK:
		if (!(name = arg_str(m, 0, 0)) || !(name2 = arg_str(m, 0, 1)))
			return -EINVAL;
		err = rdfs_symlink(c, &m->cred, r->ino, name, name2, &st);
		break;
	case RDFS_DEV_LINK:
		if (m->in_len < sizeof(*rn) || !(name = arg_str(m, sizeof(*rn), 0)))
			return -EINVAL;
		err = rdfs_link(c, &m->cred, r->ino, rn->newparent, name, &st);
		break;
	default:
		return -ENOSYS;
	}
	return err ? err : reply_attr(m, &st);
}

static int op_setattr(struct msg *m)
{
	const struct rdfs_dev_setattr *s = (const void *)m->in;
	struct rdfs_file *f = NULL;
	struct stat in, out;
	int err;

	if (m->in_len < sizeof(*s))
		return -EINVAL;
	if (m->req->handle && !(f = handle_get(m, m->req->handle, HANDLE_FILE)))
		return -EBADF;
	memset(&in, 0, sizeof(in));
	in.st_mode = s->mode;
	in.st_uid = s->uid;
	in.st_gid = s->gid;
	in.st_size = s->size;
	in.st_atim.tv_sec = s->atime_ns / 1000000000LL;
	in.st_atim.tv_nsec = s->atime_ns % 1000000000LL;
	in.st_mtim.tv_sec = s->mtime_ns / 1000000000LL;
	in.st_mtim.tv_nsec = s->mtime_ns % 1000000000LL;
	err = rdfs_setattr(m->h->client, &m->cred, m->req->ino, &in, s->valid, f, &out);
	return err ? err : reply_attr(m, &out);
}

static int op_remove(struct msg *m)
{
	const struct rdfs_dev_rename *rn = (const void *)m->in;
	struct rdfs_client *c = m->h->client;
	const char *name, *name2;

	switch (m->req->op) {
	case RDFS_DEV_UNLINK:
	case RDFS_DEV_RMDIR:
		if (!(name = arg_str(m, 0, 0)))
			return -EINVAL;
		return m->req->op == RDFS_DEV_UNLINK ? rdfs_unlink(c, &m->cred, m->req->ino, name)
						     : rdfs_rmdir(c, &m->cred, m->req->ino, name);
	case RDFS_DEV_RENAME:
		if (m->in_len < sizeof(*rn) || !(name = arg_str(m, sizeof(*rn), 0)) ||
		    !(name2 = arg_str(m, sizeof(*rn), 1)))
			return -EINVAL;
		return rdfs_rename(c, &m->cred, m->req->ino, name, rn->newparent, name2, rn->flags);
	}
	return -ENOSYS;
}

static int op_readlink(struct msg *m)
{
	int n = rdfs_readlink(m->h->client, &m->cred, m->req->ino, (char *)m->out,
			      RDFS_SYMLINK_MAX + 1);

	if (n < 0)
		return n;
	m->out_len = strlen((char *)m->out);
	return 0;
}

static int op_opendir(struct msg *m)
{
	struct rdfs_dev_open_reply *o = (void *)m->out;
	struct rdfs_dir *d;
	int err;

	/* the module asks the first page with attributes (readdirplus) */
	err = rdfs_opendir_flags(m->h->client, &m->cred, m->req->ino, RDFS_DIR_PLUS, &d);
	if (err)
		return err;
	memset(o, 0, sizeof(*o));
	o->handle = handle_new(m->h, d, HANDLE_DIR);
	if (!o->handle) {
		rdfs_closedir(d);
		return -ENOMEM;
	}
	m->out_len = sizeof(*o);
	return 0;
}

static int op_readdir(struct msg *m)
{
	const struct rdfs_dev_readdir *rd = (const void *)m->in;
	size_t room = RDFS_DEV_MAX_MSG - sizeof(struct rdfs_dev_reply);
	struct rdfs_dirent ent;
	struct rdfs_dir *d;
	uint64_t i;
	int ret;

	if (m->in_len < sizeof(*rd))
		return -EINVAL;
	d = handle_get(m, m->req->handle, HANDLE_DIR);
	if (!d)
		return -EBADF;
	rdfs_dir_set_plus(d, !!(rd->flags & RDFS_DEV_READDIR_PLUS));
	for (i = rd->index;; i++) {
		struct rdfs_dev_dirent *de = (void *)(m->out + m->out_len);
		size_t nlen, reclen, attr_off;

		ret = rdfs_readdir_at(d, i, &ent);
		if (ret < 0)
			return m->out_len ? 0 : ret;
		if (ret == 0) {
			m->rep->val = 1;
			return 0;
		}
		nlen = strlen(ent.name);
		attr_off = RDFS_DEV_DIRENT_ATTR_OFF(nlen);
		reclen = ent.has_attr ? attr_off + sizeof(struct rdfs_dev_attr) : attr_off;
		if (m->out_len + reclen > room)
			return 0;
		de->ino = ent.ino;
		de->reclen = reclen;
		de->namelen = nlen;
		de->type = IFTODT(ent.type);
		de->flags = ent.has_attr ? RDFS_DEV_DIRENT_ATTR : 0;
		memcpy(de->name, ent.name, nlen + 1);
		if (ent.has_attr)
			stat_to_attr(&ent.st, (struct rdfs_dev_attr *)((char *)de + attr_off));
		m->out_len += reclen;
	}
}

static int op_statfs(struct msg *m)
{
	struct rdfs_dev_statfs *s = (void *)m->out;
	struct statvfs sv;
	int err;

	err = rdfs_statfs(m->h->client, &m->cred, &sv);
	if (err)
		return err;
	s->blocks = sv.f_blocks;
	s->bfree = sv.f_bavail;
	s->files = sv.f_files;
	s->ffree = sv.f_ffree;
	s->bsize = sv.f_frsize;
	s->namelen = sv.f_namemax;
	m->out_len = sizeof(*s);
	return 0;
}

/* Answer an OPEN or CREATE_OPEN with a handle for @f (released if none can be had). */
static int reply_open(struct msg *m, struct rdfs_file *f, const struct stat *st)
{
	struct rdfs_dev_open_reply *rep = (void *)m->out;

	rep->handle = handle_new(m->h, f, HANDLE_FILE);
	if (!rep->handle) {
		rdfs_release(f);
		return -ENOMEM;
	}
	stat_to_attr(st, &rep->attr);
	m->out_len = sizeof(*rep);
	return 0;
}

static int op_open(struct msg *m)
{
	const struct rdfs_dev_open *o = (const void *)m->in;
	struct rdfs_file *f;
	struct stat st;
	int err, flags;

	if (m->in_len < sizeof(*o))
		return -EINVAL;
	/* the kernel truncates (setattr) and positions O_APPEND writes itself */
	flags = o->flags & ~(O_TRUNC | O_APPEND | O_CREAT | O_EXCL);
	err = rdfs_open(m->h->client, &m->cred, m->req->ino, flags, &st, &f);
	return err ? err : reply_open(m, f, &st);
}

/*
 * CREATE_OPEN (the module's atomic_open): create a regular file and open it
 * in one metaserver round trip. Only creates (O_EXCL always): a name that
 * exists is the module's to look up and open as usual.
 */
static int op_create_open(struct msg *m)
{
	const struct rdfs_dev_mknod *mk = (const void *)m->in;
	struct rdfs_file *f;
	const char *name;
	struct stat st;
	int err, flags;

	if (m->in_len < sizeof(*mk) || !(name = arg_str(m, sizeof(*mk), 0)))
		return -EINVAL;
	if (!S_ISREG(mk->mode))
		return -EINVAL;
	m->cred.umask = mk->umask & 0777;
	/* as op_open: the kernel positions O_APPEND writes itself */
	flags = (int)(mk->flags & ~(O_TRUNC | O_APPEND)) | O_CREAT | O_EXCL;
	err = rdfs_create(m->h->client, &m->cred, m->req->ino, name, mk->mode, flags, &st, &f);
	return err ? err : reply_open(m, f, &st);
}

static int op_release(struct msg *m)
{
	return handle_release(m->h, m->req->handle,
			      m->req->op == RDFS_DEV_RELEASEDIR ? HANDLE_DIR : HANDLE_FILE);
}

/*
 * Segment @s of a layout reply from copy @k of @ls: its capability packed at
 * *@caps (advanced) unless the reader sees a hole. -E2BIG: no room left.
 */
static int layout_seg_fill(struct msg *m, struct rdfs_dev_seg *s, const struct layout_seg *ls,
			   int k, uint32_t flags, const struct rdfs_dev_seg *same_cap, size_t *caps)
{
	size_t room = RDFS_DEV_MAX_MSG - sizeof(struct rdfs_dev_reply);

	memset(s, 0, sizeof(*s));
	s->offset = ls->start * BLK;
	s->length = (ls->end - ls->start) * BLK;
	s->block = ls->copy[k].block;
	s->server_id = ls->copy[k].server_id;
	s->flags = flags;
	if (ls->unwritten)
		s->flags |= RDFS_DEV_SEG_UNWRITTEN;
	if (s->flags & RDFS_DEV_SEG_HOLE || !ls->copy[k].cap)
		return 0;
	/* a piece of a segment already described: its capability once */
	if (same_cap) {
		s->cap_off = same_cap->cap_off;
		s->cap_len = same_cap->cap_len;
		return 0;
	}
	s->cap_len = rdfs__capability__get_packed_size(ls->copy[k].cap);
	if (*caps + s->cap_len > room)
		return -E2BIG;
	s->cap_off = *caps;
	rdfs__capability__pack(ls->copy[k].cap, m->out + *caps);
	*caps += s->cap_len;
	return 0;
}

/*
 * How long the module may reuse a layout of @segs: until the first of their
 * capabilities comes within the margin lib/client keeps for its own cache.
 */
static uint32_t layout_ttl_ms(const struct layout_seg *segs, int n)
{
	int64_t left = INT64_MAX, now = cap_now_ns();

	for (int i = 0; i < n; i++)
		if (segs[i].piece->expiry_ns - now - RDFS_CAP_MARGIN_NS < left)
			left = segs[i].piece->expiry_ns - now - RDFS_CAP_MARGIN_NS;
	if (left <= 0 || n == 0)
		return 0;
	return left / 1000000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(left / 1000000);
}

/*
 * Where the run of blocks from @b (below @end) ends whose blocks are all
 * written by this client (*@here 1) or none of them (0).
 */
static uint64_t written_here_run(const struct rdfs_inode *in, uint64_t b, uint64_t end, int *here)
{
	*here = inode_block_written_here(in, b, b + 1);
	while (++b < end && inode_block_written_here(in, b, b + 1) == *here)
		;
	return b;
}

/* Blocks [b, e) of segment @ls, as a segment of their own. */
static void seg_part(const struct layout_seg *ls, uint64_t b, uint64_t e, struct layout_seg *part)
{
	*part = *ls;
	part->start = b;
	part->end = e;
	for (int k = 0; k < part->ncopies; k++)
		part->copy[k].block += b - ls->start;
}

/*
 * The segments of the reply for @segs. A read layout names one copy per
 * segment (the one seg_pick_copy chose, past a server the module saw fail),
 * and splits an unwritten segment where this client wrote some of its blocks
 * (an extent allocated ahead and written in part): those are read from the
 * server, the others read as zeros. A write layout names every copy, the
 * first as the segment and the others after it with RDFS_DEV_SEG_COPY.
 * With @fill false only counts them.
 */
static int layout_segs_out(struct msg *m, struct rdfs_file *f, const struct layout_seg *segs,
			   int n, int allocate, int fill, size_t *caps)
{
	struct rdfs_dev_layout_reply *rep = (void *)m->out;
	struct rdfs_inode *in = f->in;
	uint32_t nout = 0;
	int i, k, here, err = 0;

	for (i = 0; i < n && !err; i++) {
		const struct layout_seg *ls = &segs[i];
		const struct rdfs_dev_seg *first;
		struct layout_seg part;
		uint64_t b, e;

		if (allocate && !ls->hole) {
			for (k = 0; k < ls->ncopies && !err; k++, nout++)
				if (fill)
					err = layout_seg_fill(m, &rep->segs[nout], ls, k,
							      k ? RDFS_DEV_SEG_COPY : 0, NULL, caps);
			continue;
		}
		k = ls->hole ? 0 : seg_pick_copy(f->c, ls);
		if (allocate || ls->hole || !ls->unwritten) {
			if (fill)
				err = layout_seg_fill(m, &rep->segs[nout], ls, k,
						      ls->hole ? RDFS_DEV_SEG_HOLE : 0, NULL, caps);
			nout++;
			continue;
		}
		/* unwritten blocks read as zeros, except for the client that wrote them */
		for (b = ls->start, first = NULL; b < ls->end && !err; b = e, nout++) {
			e = written_here_run(in, b, ls->end, &here);
			seg_part(ls, b, e, &part);
			if (!fill)
				continue;
			err = layout_seg_fill(m, &rep->segs[nout], &part, k,
					      here ? 0 : RDFS_DEV_SEG_HOLE, first, caps);
			if (here && !first)
				first = &rep->segs[nout];
		}
	}
	if (!err)
		rep->nsegs = nout;
	return err;
}

static int op_layout(struct msg *m)
{
	const struct rdfs_dev_layout_req *lr = (const void *)m->in;
	struct rdfs_dev_layout_reply *rep = (void *)m->out;
	size_t room = RDFS_DEV_MAX_MSG - sizeof(struct rdfs_dev_reply), caps;
	struct layout_seg *segs;
	struct rdfs_file *f;
	struct rdfs_inode *in;
	uint64_t bstart, bend;
	int n, err;

	if (m->in_len < sizeof(*lr) || lr->offset % BLK || lr->length % BLK)
		return -EINVAL;
	f = data_file_get(m);
	if (!f)
		return -EBADF;
	in = f->in;
	bstart = lr->offset / BLK;
	bend = (lr->offset + lr->length) / BLK;
	if (lr->flags & RDFS_DEV_LAYOUT_REFRESH)
		layout_refused(in, -ESTALE, bstart, bend);
	if (lr->flags & RDFS_DEV_LAYOUT_FAILED) {
		struct rdfs_peer *p = ios_peer(f->c, lr->failed_server, NULL);

		if (p)
			peer_suspect(p);
	}
	n = layout_get(f->c, in, f, NULL, bstart, bend, bend, lr->allocate, &segs);
	if (n < 0)
		return n;
	memset(rep, 0, sizeof(*rep));
	pthread_mutex_lock(&in->lock);
	rep->size = inode_size(in);
	rep->ttl_ms = layout_ttl_ms(segs, n);
	/* first how many: the capabilities follow the segment array */
	err = layout_segs_out(m, f, segs, n, lr->allocate, 0, NULL);
	caps = sizeof(*rep) + (size_t)rep->nsegs * sizeof(rep->segs[0]);
	if (!err && caps > room)
		err = -E2BIG;
	if (!err)
		err = layout_segs_out(m, f, segs, n, lr->allocate, 1, &caps);
	pthread_mutex_unlock(&in->lock);
	layout_segs_put(segs, n);
	if (err)
		return err;
	m->out_len = caps;
	return 0;
}

/* The module's write missed one copy: mark it stale, as rdfs-fuse's write_copies_settle does. */
static int op_copy_lost(struct msg *m)
{
	const struct rdfs_dev_copy_lost *cl = (const void *)m->in;
	struct rdfs_file *f;
	uint64_t b0, b1;
	int err;

	if (m->in_len < sizeof(*cl) || !cl->length || cl->offset + cl->length < cl->offset)
		return -EINVAL;
	f = data_file_get(m);
	if (!f)
		return -EBADF;
	b0 = cl->offset / BLK;
	b1 = (cl->offset + cl->length + BLK - 1) / BLK;
	err = io_copy_stale(f->c, f->in, f, NULL, cl->server_id, b0, b1);
	if (err) {
		log_warn(1400003, "ino=%llu: a write of blocks %llu-%llu missed the copy on "
			"I/O server %u, which cannot be marked stale: %s",
			(unsigned long long)f->in->ino, (unsigned long long)b0,
			(unsigned long long)b1, cl->server_id, strerror(-err));
		return err;
	}
	/* the module's next write layout must not name the stale copy */
	layout_refused(f->in, -EIO, b0, b1);
	return 0;
}

/*
 * IO_COMMIT on each server the module names. Any connection serves: an I/O
 * server's commit waits for every WRITE it received before, whoever sent it,
 * and the module had every one of its WRITEs answered before asking.
 */
static int op_io_commit(struct msg *m)
{
	const struct rdfs_dev_io_commit *ic = (const void *)m->in;
	struct rdfs_dev_io_commit_result *res = (void *)m->out;
	size_t room = RDFS_DEV_MAX_MSG - sizeof(struct rdfs_dev_reply);

	if (m->in_len < sizeof(*ic) ||
	    ic->nservers > (m->in_len - sizeof(*ic)) / sizeof(ic->server_id[0]) ||
	    ic->nservers > room / sizeof(*res))
		return -EINVAL;
	for (uint32_t i = 0; i < ic->nservers; i++) {
		uint64_t verifier = 0;

		memset(&res[i], 0, sizeof(res[i]));
		res[i].error = io_commit_server(m->h->client, ic->server_id[i], &verifier);
		res[i].verifier = verifier;
		if (res[i].error)
			log_warn(1400008, "ino=%llu: IO_COMMIT on I/O server %u: %s",
				 (unsigned long long)m->req->ino, ic->server_id[i],
				 strerror(-res[i].error));
	}
	m->out_len = ic->nservers * sizeof(*res);
	return 0;
}

static int op_connect(struct msg *m)
{
	const struct rdfs_dev_connect *cr = (const void *)m->in;
	struct rdfs_client *c = m->h->client;
	struct rdfs_peer *p;
	char url[sizeof(p->url)];
	int fd;

	if (m->in_len < sizeof(*cr))
		return -EINVAL;
	p = ios_peer(c, cr->server_id, NULL);
	if (!p)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	memcpy(url, p->url, sizeof(url));
	pthread_mutex_unlock(&p->lock);
	if (!url[0])
		return -EHOSTUNREACH;
	fd = ioconn_connect(url, &c->opts.secret, c->opts.role, m->h->timeout_ms);
	if (fd < 0) {
		log_warn(1400004, "I/O server %u (%s): %s", cr->server_id, url,
			fd == -EPROTONOSUPPORT ? "tls:// needs kernel TLS (the tls module), "
			"which this kernel does not have" : strerror(-fd));
		return -EIO;
	}
	m->rep->fd = fd;
	return 0;
}

static int op_commit(struct msg *m)
{
	const struct rdfs_dev_commit *cm = (const void *)m->in;
	struct rdfs_file *f;
	struct rdfs_inode *in;
	int err = 0;

	f = data_file_get(m);
	if (!f)
		return -EBADF;
	if (m->req->op == RDFS_DEV_FSYNC)
		return rdfs_fsync(f, 0);
	if (m->in_len < sizeof(*cm) || cm->first_block > cm->end_block)
		return -EINVAL;
	in = f->in;
	pthread_mutex_lock(&in->lock);
	if (cm->end_block > cm->first_block)
		err = range_set_add(&in->uncommitted, cm->first_block, cm->end_block);
	if (!err) {
		/* the kernel's size is authoritative for what it wrote */
		in->pending_size = cm->size;
		in->mtime_ns = cm->mtime_ns;
		in->dirty = 1;
		inode_data_changed(in);
	}
	pthread_mutex_unlock(&in->lock);
	return err ? err : rdfs_flush(f);
}

static int op_xattr(struct msg *m)
{
	const struct rdfs_dev_xattr *x = (const void *)m->in;
	struct rdfs_client *c = m->h->client;
	size_t room = RDFS_DEV_MAX_MSG - sizeof(struct rdfs_dev_reply);
	const char *name;
	int n;

	if (m->req->op == RDFS_DEV_REMOVEXATTR) {
		if (!(name = arg_str(m, 0, 0)))
			return -EINVAL;
		return rdfs_removexattr(c, &m->cred, m->req->ino, name);
	}
	if (m->in_len < sizeof(*x))
		return -EINVAL;
	if (m->req->op == RDFS_DEV_LISTXATTR) {
		n = rdfs_listxattr(c, &m->cred, m->req->ino, (char *)m->out,
				   x->size < room ? x->size : room);
	} else {
		if (!(name = arg_str(m, sizeof(*x), 0)))
			return -EINVAL;
		if (m->req->op == RDFS_DEV_SETXATTR) {
			size_t off = sizeof(*x) + strlen(name) + 1;

			if (off + x->size > m->in_len)
				return -EINVAL;
			return rdfs_setxattr(c, &m->cred, m->req->ino, name, m->in + off,
					     x->size, x->flags);
		}
		n = rdfs_getxattr(c, &m->cred, m->req->ino, name, m->out,
				  x->size < room ? x->size : room);
	}
	if (n < 0)
		return n;
	m->rep->val = n;
	m->out_len = x->size ? (size_t)n : 0;
	return 0;
}

static int op_init(struct msg *m)
{
	struct rdfs_dev_init_reply *r = (void *)m->out;
	struct stat st;
	int err;

	err = rdfs_getattr(m->h->client, &m->cred, RDFS_ROOT_INO, &st);
	if (err)
		return err;
	r->version = RDFS_DEV_ABI_VERSION;
	r->block_size = BLK;
	stat_to_attr(&st, &r->root);
	m->out_len = sizeof(*r);
	return 0;
}

/* FALLOCATE, SEEK, COPY_RANGE: what rdfs-fuse does for the same calls. */
static int op_file_range(struct msg *m)
{
	const struct rdfs_dev_fallocate *fa = (const void *)m->in;
	const struct rdfs_dev_seek *sk = (const void *)m->in;
	const struct rdfs_dev_copy *cp = (const void *)m->in;
	struct rdfs_file *f = handle_get(m, m->req->handle, HANDLE_FILE), *dst;
	struct stat st;
	int64_t n;
	int err;

	if (!f)
		return -EBADF;
	switch (m->req->op) {
	case RDFS_DEV_FALLOCATE:
		if (m->in_len < sizeof(*fa))
			return -EINVAL;
		err = rdfs_fallocate(f, (int)fa->mode, fa->offset, fa->length);
		if (!err)
			err = rdfs_getattr(m->h->client, &m->cred, m->req->ino, &st);
		return err ? err : reply_attr(m, &st);
	case RDFS_DEV_SEEK:
		if (m->in_len < sizeof(*sk))
			return -EINVAL;
		n = rdfs_seek_data(f, sk->offset, (int)sk->whence);
		if (n < 0)
			return (int)n;
		m->rep->val = (uint64_t)n;
		return 0;
	case RDFS_DEV_COPY_RANGE:
		if (m->in_len < sizeof(*cp))
			return -EINVAL;
		dst = handle_get(m, cp->dst_handle, HANDLE_FILE);
		if (!dst)
			return -EBADF;
		n = rdfs_copy_range(f, cp->off_in, dst, cp->off_out, cp->length);
		if (n < 0)
			return (int)n;
		m->rep->val = (uint64_t)n;
		err = rdfs_getattr(m->h->client, &m->cred, dst->in->ino, &st);
		return err ? err : reply_attr(m, &st);
	}
	return -ENOSYS;
}

static int dispatch(struct msg *m)
{
	switch (m->req->op) {
	case RDFS_DEV_INIT:
		return op_init(m);
	case RDFS_DEV_LOOKUP:
	case RDFS_DEV_GETATTR:
	case RDFS_DEV_CREATE:
	case RDFS_DEV_MKNOD:
	case RDFS_DEV_MKDIR:
	case RDFS_DEV_SYMLINK:
	case RDFS_DEV_LINK:
		return op_entry(m);
	case RDFS_DEV_SETATTR:
		return op_setattr(m);
	case RDFS_DEV_UNLINK:
	case RDFS_DEV_RMDIR:
	case RDFS_DEV_RENAME:
		return op_remove(m);
	case RDFS_DEV_READLINK:
		return op_readlink(m);
	case RDFS_DEV_OPENDIR:
		return op_opendir(m);
	case RDFS_DEV_READDIR:
		return op_readdir(m);
	case RDFS_DEV_RELEASEDIR:
	case RDFS_DEV_RELEASE:
		return op_release(m);
	case RDFS_DEV_STATFS:
		return op_statfs(m);
	case RDFS_DEV_OPEN:
		return op_open(m);
	case RDFS_DEV_CREATE_OPEN:
		return op_create_open(m);
	case RDFS_DEV_LAYOUT:
		return op_layout(m);
	case RDFS_DEV_CONNECT:
		return op_connect(m);
	case RDFS_DEV_COMMIT:
	case RDFS_DEV_FSYNC:
		return op_commit(m);
	case RDFS_DEV_GETXATTR:
	case RDFS_DEV_SETXATTR:
	case RDFS_DEV_LISTXATTR:
	case RDFS_DEV_REMOVEXATTR:
		return op_xattr(m);
	case RDFS_DEV_FALLOCATE:
	case RDFS_DEV_SEEK:
	case RDFS_DEV_COPY_RANGE:
		return op_file_range(m);
	case RDFS_DEV_COPY_LOST:
		return op_copy_lost(m);
	case RDFS_DEV_IO_COMMIT:
		return op_io_commit(m);
	}
	return -ENOSYS;
}

static void *serve_thread(void *arg)
{
	struct helper *h = arg;
	uint8_t *in = malloc(RDFS_DEV_MAX_MSG), *out = malloc(RDFS_DEV_MAX_MSG);
	intptr_t ret = 0;

	if (!in || !out) {
		ret = -ENOMEM;
		goto done;
	}
	for (;;) {
		struct rdfs_dev_req *req = (void *)in;
		struct rdfs_dev_reply *rep = (void *)out;
		struct msg m = { .h = h, .req = req, .out = out + sizeof(*rep), .rep = rep };
		ssize_t n = read(h->dev_fd, in, RDFS_DEV_MAX_MSG);

		if (n == 0)
			break;		/* unmounted */
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			log_error(1400005, "read /dev/rdfs: %s", strerror(errno));
			break;
		}
		if ((size_t)n < sizeof(*req) || req->len != n ||
		    req->version != RDFS_DEV_ABI_VERSION)
			continue;
		memset(rep, 0, sizeof(*rep));
		rep->id = req->id;
		rep->fd = -1;
		m.in = in + sizeof(*req);
		m.in_len = n - sizeof(*req);
		m.cred.uid = req->uid;
		m.cred.gid = req->gid;
		m.cred.ngroups = req->ngroups < RDFS_MAX_GROUPS ? req->ngroups : RDFS_MAX_GROUPS;
		memcpy(m.cred.groups, req->groups, m.cred.ngroups * sizeof(m.cred.groups[0]));
		rep->error = dispatch(&m);
		handles_put(&m);
		if (rep->error && rep->error != -ENOENT && rep->error != -EEXIST &&
		    rep->error != -ENOTEMPTY && rep->error != -ENODATA)
			log_info(1400006, "ino=%llu: op %u: %s", (unsigned long long)req->ino,
				 req->op, strerror(-rep->error));
		if (rep->error)
			m.out_len = 0;
		rep->len = sizeof(*rep) + m.out_len;
		if (write(h->dev_fd, out, rep->len) < 0)
			log_warn(1400007, "reply to op %u: %s", req->op, strerror(errno));
		if (rep->fd >= 0)
			close(rep->fd);	/* the module holds its own reference now */
	}
done:
	free(in);
	free(out);
	return (void *)ret;
}

int helper_start(struct helper *h)
{
	int i;

	for (i = 0; i < HELPER_THREADS; i++)
		if (pthread_create(&h->threads[h->nthreads], NULL, serve_thread, h) == 0)
			h->nthreads++;
	return h->nthreads ? 0 : -EAGAIN;
}

int helper_join(struct helper *h)
{
	void *ret;
	int i, err = 0;

	for (i = 0; i < h->nthreads; i++) {
		pthread_join(h->threads[i], &ret);
		if ((intptr_t)ret && !err)
			err = (intptr_t)ret;
	}
	h->nthreads = 0;
	return err;
}
