// SPDX-License-Identifier: MIT
/*
 * ior_task.c - one benchmark task (a forked process): for every repetition the
 * write phase, the -W check, the read phase and the removal, in step with the
 * other tasks through a process-shared barrier, with IOR's six timestamps per
 * timed phase written to memory the parent reads afterwards.
 *
 * A task that hits an I/O error records it and keeps meeting the barriers
 * without doing I/O, so the others never wait for it forever.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ior.h"

struct ior_task {
	const struct ior_params *p;
	struct ior_shared *sh;
	struct ior_task_result *res;
	int id;
	void *buf;
};

static double now_s(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC is one clock for every process, so stamps compare across tasks. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t shared_size(const struct ior_params *p)
{
	size_t per_task = sizeof(double) * (size_t)p->reps * IOR_NPHASES * (IOR_NSTAMPS + 1);

	return sizeof(struct ior_shared) + (size_t)p->ntasks * (sizeof(struct ior_task_result) + per_task);
}

struct ior_shared *ior_shared_create(const struct ior_params *p)
{
	size_t size = shared_size(p);
	struct ior_shared *sh;
	pthread_barrierattr_t attr;
	double *arrays;
	int t;

	sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return NULL;
	sh->ntasks = p->ntasks;
	arrays = (double *)((char *)sh + sizeof(*sh) + (size_t)p->ntasks * sizeof(sh->task[0]));
	for (t = 0; t < p->ntasks; t++) {
		sh->task[t].stamps = arrays;
		arrays += (size_t)p->reps * IOR_NPHASES * IOR_NSTAMPS;
		sh->task[t].xfer_sum = arrays;
		arrays += (size_t)p->reps * IOR_NPHASES;
	}
	pthread_barrierattr_init(&attr);
	pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	if (pthread_barrier_init(&sh->barrier, &attr, (unsigned int)p->ntasks) != 0) {
		munmap(sh, size);
		return NULL;
	}
	pthread_barrierattr_destroy(&attr);
	return sh;
}

void ior_shared_destroy(struct ior_shared *sh, const struct ior_params *p)
{
	pthread_barrier_destroy(&sh->barrier);
	munmap(sh, shared_size(p));
}

double *ior_stamps(const struct ior_params *p, struct ior_task_result *r, int iter, int phase)
{
	return r->stamps + ((size_t)iter * IOR_NPHASES + phase) * IOR_NSTAMPS;
}

static void barrier(struct ior_task *t)
{
	pthread_barrier_wait(&t->sh->barrier);
}

static int failed(struct ior_task *t)
{
	return t->res->error[0] != '\0';
}

/* @off: file offset of a read or write, -1 for calls that have none. */
static void set_error(struct ior_task *t, const char *what, const char *path, int64_t off, int err)
{
	char where[48] = "";

	if (failed(t))
		return;
	if (off >= 0)
		snprintf(where, sizeof(where), " at offset %lld", (long long)off);
	snprintf(t->res->error, sizeof(t->res->error), "task %d: %s %s%s: %s%s",
		 t->id, what, path, where, strerror(err),
		 err == EINVAL && t->p->direct ? " (O_DIRECT needs 4 KiB-aligned sizes)" : "");
}

static void note_mismatch(struct ior_task *t, int phase, int iter, int writer, const char *path,
			  uint64_t off, uint8_t expected, uint8_t actual)
{
	struct ior_mismatch *m = &t->res->first;

	t->res->mismatched_xfers++;
	/* Keep the lowest offset of the first check (iteration, phase) that failed. */
	if (m->found && (m->iter != iter || m->phase != phase || m->offset <= off))
		return;
	m->found = 1;
	m->phase = phase;
	m->iter = iter;
	m->writer = writer;
	m->offset = off;
	m->expected = expected;
	m->actual = actual;
	snprintf(m->path, sizeof(m->path), "%s", path);
}

static int open_flags(struct ior_task *t, int phase)
{
	int flags = phase == IOR_PHASE_WRITE ? O_WRONLY | O_CREAT : O_RDONLY;

	if (t->p->direct)
		flags |= O_DIRECT;
	return flags;
}

/* Push this task's data out of the client's page cache (--drop-cache). */
static void drop_cache(struct ior_task *t, const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		set_error(t, "open (drop-cache)", path, -1, errno);
		return;
	}
	/* DONTNEED drops clean pages only, so write back dirty ones first. */
	if (fdatasync(fd) < 0)
		set_error(t, "fdatasync", path, -1, errno);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/*
 * Move every transfer of task @owner's data through @fd: write it (pattern of
 * @owner), or read it and, unless @check is -1, check it and blame mismatches
 * on the check of phase @check (-W: IOR_PHASE_WRITE, -R: IOR_PHASE_READ).
 * Returns 0 or -1 (error set).
 */
static int transfer_all(struct ior_task *t, int fd, int phase, int owner, int check,
			int iter, const char *path, double *xfer_sum)
{
	const struct ior_params *p = t->p;
	uint64_t per_block = p->block / p->xfer;
	uint64_t s, k;

	for (s = 0; s < p->segments; s++) {
		for (k = 0; k < per_block; k++) {
			uint64_t off = ior_xfer_offset(p, owner, s, k);
			ssize_t n;
			double t0;

			if (phase == IOR_PHASE_WRITE)
				ior_pattern_fill(t->buf, p->xfer, off, owner);
			t0 = now_s();
			if (phase == IOR_PHASE_WRITE)
				n = pwrite(fd, t->buf, p->xfer, (off_t)off);
			else
				n = pread(fd, t->buf, p->xfer, (off_t)off);
			*xfer_sum += now_s() - t0;
			if (n < 0) {
				set_error(t, phase == IOR_PHASE_WRITE ? "write" : "read", path, (int64_t)off, errno);
				return -1;
			}
			if ((uint64_t)n != p->xfer) {
				snprintf(t->res->error, sizeof(t->res->error),
					 "task %d: short %s of %s at offset %llu: %zd of %llu bytes",
					 t->id, phase == IOR_PHASE_WRITE ? "write" : "read", path,
					 (unsigned long long)off, n, (unsigned long long)p->xfer);
				return -1;
			}
			if (check >= 0) {
				uint8_t expected;
				long bad = ior_pattern_check(t->buf, p->xfer, off, owner, &expected);

				if (bad >= 0)
					note_mismatch(t, check, iter, owner, path, off + (uint64_t)bad,
						      expected, ((uint8_t *)t->buf)[bad]);
			}
		}
	}
	return 0;
}

/* One timed phase, with IOR's barriers between open, transfer and close. */
static void timed_phase(struct ior_task *t, int iter, int phase)
{
	const struct ior_params *p = t->p;
	double *ts = ior_stamps(p, t->res, iter, phase);
	double *xfer_sum = &t->res->xfer_sum[(size_t)iter * IOR_NPHASES + phase];
	int owner = phase == IOR_PHASE_WRITE ? t->id : ior_read_source(p, t->id);
	char path[IOR_PATH_MAX];
	int fd = -1;

	ior_task_path(p, owner, path, sizeof(path));
	if (phase == IOR_PHASE_READ && p->drop_cache && !failed(t))
		drop_cache(t, path);

	barrier(t);
	ts[IOR_T_OPEN_START] = now_s();
	if (!failed(t)) {
		fd = open(path, open_flags(t, phase), 0644);
		if (fd < 0)
			set_error(t, "open", path, -1, errno);
	}
	ts[IOR_T_OPEN_END] = now_s();

	barrier(t);
	ts[IOR_T_XFER_START] = now_s();
	if (fd >= 0 && !failed(t)) {
		int check = phase == IOR_PHASE_READ && p->check_read ? IOR_PHASE_READ : -1;

		if (transfer_all(t, fd, phase, owner, check, iter, path, xfer_sum) == 0 &&
		    phase == IOR_PHASE_WRITE && p->fsync && fsync(fd) < 0)
			set_error(t, "fsync", path, -1, errno);
	}
	ts[IOR_T_XFER_END] = now_s();

	barrier(t);
	ts[IOR_T_CLOSE_START] = now_s();
	if (fd >= 0 && close(fd) < 0)
		set_error(t, "close", path, -1, errno);
	ts[IOR_T_CLOSE_END] = now_s();

	if (phase == IOR_PHASE_WRITE && p->drop_cache && !failed(t))
		drop_cache(t, path);
}

/* -W: read back what was just written (by the -C neighbour) and compare. */
static void check_write(struct ior_task *t, int iter)
{
	int owner = ior_read_source(t->p, t->id);
	char path[IOR_PATH_MAX];
	double ignored = 0;
	int fd;

	barrier(t);
	if (failed(t))
		return;
	ior_task_path(t->p, owner, path, sizeof(path));
	fd = open(path, open_flags(t, IOR_PHASE_READ));
	if (fd < 0) {
		set_error(t, "open", path, -1, errno);
		return;
	}
	transfer_all(t, fd, IOR_PHASE_READ, owner, IOR_PHASE_WRITE, iter, path, &ignored);
	close(fd);
}

/* Remove the test file(s) before a write phase and after a repetition (IOR's default). */
static void remove_files(struct ior_task *t)
{
	char path[IOR_PATH_MAX];

	barrier(t);
	if (t->p->file_per_proc || t->id == 0) {
		ior_task_path(t->p, t->id, path, sizeof(path));
		if (unlink(path) < 0 && errno != ENOENT)
			set_error(t, "unlink", path, -1, errno);
	}
	barrier(t);
}

int ior_task_main(const struct ior_params *p, struct ior_shared *sh, int task)
{
	struct ior_task t = { .p = p, .sh = sh, .res = &sh->task[task], .id = task };
	int iter;

	/* Page-aligned so O_DIRECT accepts it. */
	if (posix_memalign(&t.buf, 4096, p->xfer) != 0) {
		snprintf(t.res->error, sizeof(t.res->error), "task %d: out of memory for a %llu-byte buffer",
			 task, (unsigned long long)p->xfer);
		t.buf = NULL;
	}
	for (iter = 0; iter < p->reps; iter++) {
		if (p->write) {
			remove_files(&t);
			timed_phase(&t, iter, IOR_PHASE_WRITE);
			if (p->check_write)
				check_write(&t, iter);
		}
		if (p->read)
			timed_phase(&t, iter, IOR_PHASE_READ);
		if (!p->keep)
			remove_files(&t);
	}
	free(t.buf);
	return failed(&t) ? 1 : 0;
}
