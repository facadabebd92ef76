// SPDX-License-Identifier: MIT
/*
 * fs.c - the sweep through a file system: sequential reads and writes of whole
 * files with read(2)/write(2) of each request size, one thread per file (many
 * sequential clients, as in SuperNBD's figure 2). Used on the FUSE mount, and
 * with O_DIRECT on a scratch file beside the volume for the disk's write rate.
 *
 * Size i of the plan covers region i of every file (see file_region()), so each
 * byte is read once per pass; a read pass first drops the files' pages from the
 * client page cache (POSIX_FADV_DONTNEED, after the writer's fsync left them
 * clean), so the data comes from the servers.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"

struct fs_worker {
	const struct sweep_plan *p;
	const char *path;
	int fd;
	int write;
	uint64_t size;			/* request size */
	uint64_t off;			/* region start */
	uint64_t len;			/* region length */
	void *buf;
	double verify_s;
	double seconds;
	int err;
	/* disk-write with --depth N: N writers share the region (next: its cursor) */
	int writers;
	uint64_t next;
};

/* One of a region's concurrent writers: its own buffer, the shared cursor. */
struct fs_writer {
	struct fs_worker *w;
	void *buf;
	double fill_s;
	int err;
	pthread_t th;
};

/* Region of size index @i in every file: the plan's budget for each size before it. */
static uint64_t file_region(const struct sweep_plan *p, int i, uint64_t *len)
{
	uint64_t off = 0;
	int k;

	for (k = 0; k < i; k++)
		off += plan_requests(p, p->sizes[k]) * p->sizes[k];
	*len = plan_requests(p, p->sizes[i]) * p->sizes[i];
	return off;
}

uint64_t fs_file_bytes(const struct sweep_plan *p)
{
	uint64_t len;

	return file_region(p, p->nsizes - 1, &len) + len;
}

/*
 * A region written by several threads at once, each taking the next request
 * (the I/O server's write pattern: many chunk WRITEs in flight); a write error
 * stops them all. The caller fsyncs.
 */
static void *fs_writer_main(void *arg)
{
	struct fs_writer *fw = arg;
	struct fs_worker *w = fw->w;
	uint64_t off;
	ssize_t n;

	for (;;) {
		double v0;

		if (__atomic_load_n(&w->err, __ATOMIC_RELAXED))
			break;
		off = __atomic_fetch_add(&w->next, w->size, __ATOMIC_RELAXED);
		if (off >= w->len)
			break;
		off += w->off;
		v0 = now_seconds();
		pattern_fill(fw->buf, w->size, off, w->p->seed);
		fw->fill_s += now_seconds() - v0;
		do {
			n = pwrite(w->fd, fw->buf, w->size, (off_t)off);
		} while (n < 0 && errno == EINTR);
		if (n != (ssize_t)w->size) {
			fw->err = n < 0 ? -errno : -EIO;
			fprintf(stderr, "rdfs-sweep: write of %llu bytes at %llu of %s: %s\n",
				(unsigned long long)w->size, (unsigned long long)off, w->path,
				n < 0 ? strerror(errno) : "short write");
			__atomic_store_n(&w->err, fw->err, __ATOMIC_RELAXED);
			break;
		}
	}
	return NULL;
}

static int fs_write_concurrently(struct fs_worker *w)
{
	struct fs_writer fws[64];
	int k, started = 0, ret = 0;
	double fill_max = 0;

	memset(fws, 0, sizeof(fws));
	w->next = 0;
	for (k = 0; k < w->writers && k < 64; k++) {
		fws[k].w = w;
		if (posix_memalign(&fws[k].buf, SWEEP_BLOCK, w->size)) {
			ret = -ENOMEM;
			break;
		}
		if (pthread_create(&fws[k].th, NULL, fs_writer_main, &fws[k])) {
			free(fws[k].buf);
			fws[k].buf = NULL;
			ret = -EAGAIN;
			break;
		}
		started++;
	}
	if (ret)
		__atomic_store_n(&w->err, ret, __ATOMIC_RELAXED);
	for (k = 0; k < started; k++) {
		pthread_join(fws[k].th, NULL);
		if (fws[k].err && !ret)
			ret = fws[k].err;
		/* they fill at once: the pattern's time is about the longest one's */
		if (fws[k].fill_s > fill_max)
			fill_max = fws[k].fill_s;
		free(fws[k].buf);
	}
	w->verify_s += fill_max;
	return ret;
}

static void *fs_worker_main(void *arg)
{
	struct fs_worker *w = arg;
	double t0 = now_seconds();
	uint64_t done = 0;

	if (w->write && w->writers > 1) {
		w->err = fs_write_concurrently(w);
		done = w->len;
	}

	while (done < w->len && !w->err) {
		uint64_t off = w->off + done;
		ssize_t n;

		if (w->write) {
			double v0 = now_seconds();

			pattern_fill(w->buf, w->size, off, w->p->seed);
			w->verify_s += now_seconds() - v0;
			n = pwrite(w->fd, w->buf, w->size, (off_t)off);
		} else {
			n = pread(w->fd, w->buf, w->size, (off_t)off);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)w->size) {
			struct stat st = { 0 };

			w->err = n < 0 ? -errno : -EIO;
			fstat(w->fd, &st);
			if (n < 0)
				fprintf(stderr, "rdfs-sweep: %s of %llu bytes at %llu of %s: %s\n",
					w->write ? "write" : "read", (unsigned long long)w->size,
					(unsigned long long)off, w->path, strerror(-w->err));
			else
				fprintf(stderr, "rdfs-sweep: SHORT %s: %zd of %llu bytes at %llu of "
					"%s (file size %llu)\n", w->write ? "WRITE" : "READ", n,
					(unsigned long long)w->size, (unsigned long long)off,
					w->path, (unsigned long long)st.st_size);
			break;
		}
		if (!w->write && w->p->verify) {
			double v0 = now_seconds();

			w->err = pattern_check(w->buf, w->size, off, w->p->seed, w->path);
			w->verify_s += now_seconds() - v0;
		}
		done += w->size;
	}
	/* a write counts once it is durable */
	if (w->write && !w->err && fsync(w->fd)) {
		w->err = -errno;
		fprintf(stderr, "rdfs-sweep: fsync of %s: %s\n", w->path, strerror(errno));
	}
	w->seconds = now_seconds() - t0 - w->verify_s;
	return NULL;
}

/* @paths: NULL-terminated. @direct: O_DIRECT (the disk's own write rate). */
int sweep_fs(struct sweep_env *env, const struct sweep_plan *p, char **paths, int write,
	     int direct)
{
	int nfiles = 0, i, k, ret = 0;
	struct fs_worker *ws;
	pthread_t *th;

	while (paths[nfiles])
		nfiles++;
	if (nfiles == 0) {
		fprintf(stderr, "rdfs-sweep: name at least one FILE\n");
		return SWEEP_USAGE;
	}
	ws = calloc(nfiles, sizeof(*ws));
	th = calloc(nfiles, sizeof(*th));
	if (!ws || !th) {
		free(ws);
		free(th);
		return SWEEP_FAIL;
	}
	for (k = 0; k < nfiles && !ret; k++) {
		int flags = write ? O_WRONLY | O_CREAT : O_RDONLY;

		ws[k].p = p;
		ws[k].path = paths[k];
		ws[k].write = write;
		ws[k].writers = write && direct ? p->depth : 1;
		ws[k].fd = open(paths[k], flags | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
		if (ws[k].fd < 0 && direct && errno == EINVAL) {
			/* tmpfs: no O_DIRECT; the timed fsync still makes the data durable */
			fprintf(stderr, "rdfs-sweep: %s refuses O_DIRECT; writing it buffered\n",
				paths[k]);
			direct = 0;
			ws[k].fd = open(paths[k], flags | O_CLOEXEC, 0644);
		}
		if (ws[k].fd < 0) {
			fprintf(stderr, "rdfs-sweep: cannot open %s: %s\n", paths[k], strerror(errno));
			ret = -errno;
			break;
		}
		if (posix_memalign(&ws[k].buf, SWEEP_BLOCK, p->sizes[p->nsizes - 1])) {
			ret = -ENOMEM;
			break;
		}
		/*
		 * The disk's write rate as the I/O server meets it: its volume is a
		 * sparse file, and every first write of a block fills a hole (block
		 * allocation, unwritten-extent conversion), unlike appending to a
		 * file or overwriting allocated blocks.
		 */
		if (write && direct && ftruncate(ws[k].fd, (off_t)fs_file_bytes(p))) {
			fprintf(stderr, "rdfs-sweep: cannot size %s: %s\n", paths[k],
				strerror(errno));
			ret = -errno;
			break;
		}
		if (!write) {
			struct stat st;

			if (fstat(ws[k].fd, &st) == 0 && (uint64_t)st.st_size < fs_file_bytes(p)) {
				fprintf(stderr, "rdfs-sweep: %s holds %llu bytes; the plan reads "
					"%llu (write it with fs-write and the same sizes)\n", paths[k],
					(unsigned long long)st.st_size,
					(unsigned long long)fs_file_bytes(p));
				ret = -ENODATA;
				break;
			}
			/* the client page cache must not answer: only clean pages exist now */
			posix_fadvise(ws[k].fd, 0, 0, POSIX_FADV_DONTNEED);
		}
	}
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r = { .request_bytes = p->sizes[i] };
		char extra[160];

		for (k = 0; k < nfiles; k++) {
			ws[k].size = p->sizes[i];
			ws[k].off = file_region(p, i, &ws[k].len);
			ws[k].verify_s = 0;
			if (pthread_create(&th[k], NULL, fs_worker_main, &ws[k])) {
				ret = -EAGAIN;
				break;
			}
		}
		for (int j = 0; j < k; j++) {
			pthread_join(th[j], NULL);
			if (ws[j].err && !ret)
				ret = ws[j].err;
			/* all readers run at once: the slowest one's time is the pass's */
			if (ws[j].seconds > r.seconds)
				r.seconds = ws[j].seconds;
			r.bytes += ws[j].len;
			r.requests += ws[j].len / ws[j].size;
		}
		if (ret)
			break;
		result_finish(&r);
		snprintf(extra, sizeof(extra), "\"readers\": %d, \"io\": \"%s%s\"", nfiles,
			 write ? "write+fsync" : "read",
			 direct ? ", O_DIRECT into a sparse file's holes" : "");
		result_emit(env, p, &r, extra);
	}
	for (k = 0; k < nfiles; k++) {
		if (ws[k].fd > 0)
			close(ws[k].fd);
		free(ws[k].buf);
	}
	free(ws);
	free(th);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
