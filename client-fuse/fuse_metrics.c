// SPDX-License-Identifier: MIT
/*
 * fuse_metrics.c - rdfs-fuse's metrics (fuse_metrics.h): FUSE requests by
 * operation, counted around libfuse's dispatch, and collectors over the
 * client core's counters.
 *
 * An opcode is read from the request's fuse_in_header before libfuse
 * dispatches it (the session loop never splices requests in, so the header
 * is in memory). Opcodes without a name here (those libfuse answers ENOSYS
 * itself, and any the kernel adds) count as "other".
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>

#include "frame.h"
#include "fuse_metrics.h"
#include "metrics.h"

/* Above every opcode the kernel sends a file system (CUSE_INIT aside). */
#define FUSE_METRICS_OPS 64
#define OP_OTHER	 0 /* no FUSE opcode is 0 */

static const char *const op_names[FUSE_METRICS_OPS] = {
	[OP_OTHER] = "other",
	[FUSE_LOOKUP] = "lookup",
	[FUSE_FORGET] = "forget",
	[FUSE_BATCH_FORGET] = "batch_forget",
	[FUSE_GETATTR] = "getattr",
	[FUSE_SETATTR] = "setattr",
	[FUSE_READLINK] = "readlink",
	[FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod",
	[FUSE_MKDIR] = "mkdir",
	[FUSE_UNLINK] = "unlink",
	[FUSE_RMDIR] = "rmdir",
	[FUSE_RENAME] = "rename",
	[FUSE_RENAME2] = "rename2",
	[FUSE_LINK] = "link",
	[FUSE_OPEN] = "open",
	[FUSE_READ] = "read",
	[FUSE_WRITE] = "write",
	[FUSE_STATFS] = "statfs",
	[FUSE_RELEASE] = "release",
	[FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr",
	[FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr",
	[FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush",
	[FUSE_INIT] = "init",
	[FUSE_OPENDIR] = "opendir",
	[FUSE_READDIR] = "readdir",
	[FUSE_READDIRPLUS] = "readdirplus",
	[FUSE_RELEASEDIR] = "releasedir",
	[FUSE_FSYNCDIR] = "fsyncdir",
	[FUSE_CREATE] = "create",
	[FUSE_INTERRUPT] = "interrupt",
	[FUSE_DESTROY] = "destroy",
	[FUSE_FALLOCATE] = "fallocate",
	[FUSE_LSEEK] = "lseek",
	[FUSE_COPY_FILE_RANGE] = "copy_file_range",
};

static const struct metrics_dim op_dim = { "op", op_names, FUSE_METRICS_OPS };

/* The families; all NULL (every update a no-op) until fuse_metrics_register(). */
static struct {
	struct metric *requests;
	struct metric *errors;
	struct metric *duration;
	struct metric *in_flight;
	struct metric *read_bytes;
	struct metric *write_bytes;
	struct metric *groups_reads;
} fm;

/* The request the calling thread is handling. */
static __thread struct {
	unsigned int op;
	int err;
	uint64_t start_ns;
	int active;
} cur;

void fuse_metrics_begin(const struct fuse_buf *buf)
{
	const struct fuse_in_header *in = buf->mem;

	if (!fm.requests)
		return;
	cur.op = OP_OTHER;
	if (!(buf->flags & FUSE_BUF_IS_FD) && in && buf->size >= sizeof(*in) &&
	    in->opcode < FUSE_METRICS_OPS && op_names[in->opcode])
		cur.op = in->opcode;
	cur.err = 0;
	cur.active = 1;
	cur.start_ns = metrics_now_ns();
	metrics_add(fm.requests, cur.op, 0, 1);
	metrics_gauge_add(fm.in_flight, 0, 1);
}

void fuse_metrics_end(void)
{
	if (!cur.active)
		return;
	cur.active = 0;
	metrics_observe(fm.duration, cur.op, metrics_now_ns() - cur.start_ns);
	if (cur.err > 0)
		metrics_add(fm.errors, cur.op, (unsigned int)cur.err, 1);
	metrics_gauge_add(fm.in_flight, 0, -1);
}

void fuse_metrics_error(int err)
{
	if (cur.active && err > 0)
		cur.err = err;
}

void fuse_metrics_read_bytes(uint64_t n)
{
	metrics_add(fm.read_bytes, 0, 0, n);
}

void fuse_metrics_write_bytes(uint64_t n)
{
	metrics_add(fm.write_bytes, 0, 0, n);
}

void fuse_metrics_groups_read(void)
{
	metrics_add(fm.groups_reads, 0, 0, 1);
}

/* ---------------------------------------------------------------- the client core */

static struct rdfs_client *core;

/* A family of one counter of struct rdfs_client_stats; @arg points to its offset there. */
static void collect_counter(void *arg, struct metrics_emitter *e)
{
	const size_t *off = arg;
	struct rdfs_client_stats st;
	uint64_t v;

	rdfs_client_stats(core, &st);
	memcpy(&v, (const char *)&st + *off, sizeof(v));
	metrics_emit(e, NULL, (double)v);
}

/* Capability refusals: one family, a series per reason. */
static void collect_refusals(void *arg, struct metrics_emitter *e)
{
	static const char *const fenced[] = { "fenced" };
	static const char *const expired[] = { "expired" };
	static const char *const refused[] = { "refused" };
	struct rdfs_client_stats st;

	rdfs_client_stats(core, &st);
	metrics_emit(e, fenced, (double)st.cap_refused_fenced);
	metrics_emit(e, expired, (double)st.cap_refused_expired);
	metrics_emit(e, refused, (double)st.cap_refused_other);
}

/* Metaserver requests: a series for each opcode sent at least once. */
static void collect_ms_requests(void *arg, struct metrics_emitter *e)
{
	struct rdfs_client_stats st;

	rdfs_client_stats(core, &st);
	for (unsigned int op = 0; op < RDFS_OP_MAX; op++) {
		const char *name = frame_op_name(op);

		if (st.ms_requests[op])
			metrics_emit(e, &name, (double)st.ms_requests[op]);
	}
}

#define CORE(field) offsetof(struct rdfs_client_stats, field)

static const struct {
	const char *name;
	const char *help;
	size_t off;
} core_counters[] = {
	{ "rdfs_client_layout_cache_hits_total",
	  "Block ranges whose layout (and capabilities) the client found whole in its cache.",
	  CORE(layout_hits) },
	{ "rdfs_client_layout_cache_misses_total",
	  "Block ranges whose layout the client had to ask the metaserver for (LAYOUT): "
	  "not cached, expired, or dropped after a capability refusal.",
	  CORE(layout_misses) },
	{ "rdfs_client_layout_allocations_total",
	  "LAYOUT requests that allocated blocks (writes beyond what the file had).",
	  CORE(layout_allocs) },
	{ "rdfs_client_readahead_bytes_total",
	  "Bytes the client core read ahead (0 under rdfs-fuse: the kernel reads ahead).",
	  CORE(readahead_bytes) },
	{ "rdfs_client_readahead_hit_bytes_total",
	  "Bytes of reads the client core answered from its read-ahead.",
	  CORE(readahead_hit_bytes) },
	{ "rdfs_client_write_behind_bytes_total",
	  "Bytes queued to write-behind (written to the I/O servers after write(2) returned).",
	  CORE(write_behind_bytes) },
	{ "rdfs_client_write_behind_lent_bytes_total",
	  "Of the write-behind bytes, those sent from the request's own buffer, uncopied.",
	  CORE(write_behind_lent_bytes) },
	{ "rdfs_client_write_behind_writes_total", "WRITE requests sent by write-behind.",
	  CORE(write_behind_writes) },
	{ "rdfs_client_dir_attr_hits_total",
	  "Directory attributes answered from the reply of a change made there, without a "
	  "GETATTR.",
	  CORE(dir_attr_hits) },
};

int fuse_metrics_register(struct metrics *r, struct rdfs_client *c)
{
	static const char *const op_label[] = { "op" };
	static const char *const reason_label[] = { "reason" };
	int bad = 0;

	core = c;
	fm.requests = metrics_counter(r, "rdfs_fuse_requests_total",
				      "FUSE requests read from the kernel, by operation.", &op_dim,
				      NULL, 0);
	fm.errors = metrics_counter(r, "rdfs_fuse_request_errors_total",
				    "FUSE requests answered with an error, by operation and errno.",
				    &op_dim, metrics_errno_dim(), METRICS_SPARSE);
	fm.duration = metrics_histogram(
		r, "rdfs_fuse_request_duration_seconds",
		"Time from reading a FUSE request to the end of its handling "
		"(its reply sent), by operation.",
		&op_dim, metrics_latency_bounds_ns, metrics_latency_nbounds, 1e9);
	fm.in_flight = metrics_gauge(r, "rdfs_fuse_requests_in_flight",
				     "FUSE requests being handled now.", NULL);
	fm.read_bytes = metrics_counter(r, "rdfs_fuse_read_bytes_total",
					"Bytes of file data READ replies carried to the kernel.",
					NULL, NULL, 0);
	fm.write_bytes = metrics_counter(r, "rdfs_fuse_write_bytes_total",
					 "Bytes of file data the kernel's WRITE requests brought.",
					 NULL, NULL, 0);
	fm.groups_reads = metrics_counter(
		r, "rdfs_fuse_groups_reads_total",
		"Callers' supplementary groups read from /proc; the other requests found them "
		"remembered (groups_timeout).",
		NULL, NULL, 0);
	bad |= !fm.requests || !fm.errors || !fm.duration || !fm.in_flight || !fm.read_bytes ||
	       !fm.write_bytes || !fm.groups_reads;
	bad |= !metrics_collector(r, "rdfs_client_metaserver_requests_total",
				  "Requests the client core sent to the metaserver, by operation "
				  "(retries on a new connection included).",
				  METRICS_COUNTER, op_label, 1, collect_ms_requests, NULL);
	bad |= !metrics_collector(r, "rdfs_client_capability_refusals_total",
				  "I/O requests an I/O server refused for their capability: fenced "
				  "(ESTALE, the layout is dropped and fetched again), expired "
				  "(EKEYEXPIRED) or refused (EACCES, EBADMSG).",
				  METRICS_COUNTER, reason_label, 1, collect_refusals, NULL);
	for (size_t i = 0; i < sizeof(core_counters) / sizeof(core_counters[0]); i++)
		bad |= !metrics_collector(r, core_counters[i].name, core_counters[i].help,
					  METRICS_COUNTER, NULL, 0, collect_counter,
					  (void *)&core_counters[i].off);
	if (bad) {
		memset(&fm, 0, sizeof(fm));
		return -EINVAL;
	}
	return 0;
}
