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
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ior.h"

struct ior_task {
	const struct ior_params *p;
	struct ior_shared *sh;
	struct ior_task_result *res;
	struct ior_backend *io;
	int id;
	void *buf;
	uint64_t *order;		/* ior_xfer_order() of the task whose data is moved */
	int order_owner;		/* whose order is in @order, -1: none yet */
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
	size_t per_task = sizeof(double) * (size_t)p->reps * IOR_NPHASES * (IOR_NSTAMPS + 1) +
			  sizeof(uint64_t) * (size_t)p->reps * IOR_NPHASES;

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
		sh->task[t].moved = (uint64_t *)arrays;
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

static const uint64_t *order_of(struct ior_task *t, int owner)
{
	if (t->order_owner != owner) {
		ior_xfer_order(t->p, owner, t->order);
		t->order_owner = owner;
	}
	return t->order;
}

/*
 * How many of @owner's transfers a read of repetition @iter covers: all, or
 * with a stonewall only what the write of the same repetition got done.
 */
static uint64_t readable_xfers(struct ior_task *t, int owner, int iter)
{
	uint64_t n = ior_xfers_per_task(t->p);

	if (t->p->stonewall > 0 && t->p->write) {
		uint64_t w = t->sh->task[owner].moved[(size_t)iter * IOR_NPHASES + IOR_PHASE_WRITE];

		if (w < n)
			n = w;
	}
	return n;
}

/*
 * Move task @owner's transfers through @f in its order: write them (pattern of
 * @owner), or read them and, unless @check is -1, check them and blame a
 * mismatch on the check of phase @check (-W: IOR_PHASE_WRITE, -R:
 * IOR_PHASE_READ). @deadline: stonewall time, 0 for none. Returns the number
 * of transfers done, or -1 (error set).
 */
static int64_t transfer_all(struct ior_task *t, struct ior_file *f, int phase, int owner,
			    int check, int iter, const char *path, uint64_t count,
			    double deadline, double *xfer_sum)
{
	const struct ior_params *p = t->p;
	const uint64_t *order = order_of(t, owner);
	uint64_t i;

	for (i = 0; i < count; i++) {
		uint64_t off = ior_index_offset(p, owner, order[i]);
		ssize_t n;
		double t0;

		if (phase == IOR_PHASE_WRITE)
			ior_pattern_fill(t->buf, p->xfer, off, owner);
		t0 = now_s();
		/* As IOR: the stonewall is checked between transfers, so at least one is done. */
		if (deadline > 0 && i > 0 && t0 >= deadline)
			break;
		if (phase == IOR_PHASE_WRITE) {
			n = ior_file_pwrite(f, t->buf, p->xfer, off);
			if (n >= 0 && p->fsync_per_write) {
				int ret = ior_file_fsync(f);

				if (ret < 0)
					n = ret;
			}
		} else
			n = ior_file_pread(f, t->buf, p->xfer, off);
		*xfer_sum += now_s() - t0;
		if (n < 0) {
			set_error(t, phase == IOR_PHASE_WRITE ? "write" : "read", path, (int64_t)off,
				  (int)-n);
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
	return (int64_t)i;
}

static void drop_own_cache(struct ior_task *t, const char *path)
{
	char note[sizeof(t->sh->cache_note)];
	int ret = ior_drop_cache(t->io, path, note, sizeof(note));

	if (ret < 0)
		set_error(t, "drop cache of", path, -1, -ret);
	else if (t->id == 0)
		snprintf(t->sh->cache_note, sizeof(t->sh->cache_note), "%s", note);
}

/* --drop-cache-cmd: task 0 runs it while the others wait. */
static void drop_cache_cmd(struct ior_task *t)
{
	barrier(t);
	if (t->id == 0) {
		int status = system(t->p->drop_cache_cmd);

		if (status != 0)
			snprintf(t->res->error, sizeof(t->res->error),
				 "task 0: --drop-cache-cmd '%s' failed (status %d)",
				 t->p->drop_cache_cmd, status);
	}
	barrier(t);
}

/* One timed phase, with IOR's barriers between open, transfer and close. */
static void timed_phase(struct ior_task *t, int iter, int phase)
{
	const struct ior_params *p = t->p;
	size_t slot = (size_t)iter * IOR_NPHASES + phase;
	double *ts = ior_stamps(p, t->res, iter, phase);
	double *xfer_sum = &t->res->xfer_sum[slot];
	int owner = phase == IOR_PHASE_WRITE ? t->id : ior_read_source(p, t->id);
	char path[IOR_PATH_MAX];
	struct ior_file *f = NULL;
	int ret;

	ior_task_path(p, owner, path, sizeof(path));
	/* The -z permutation is made before the clock starts, as IOR makes its offsets. */
	if (t->order)
		order_of(t, owner);
	/* Also after the write's drop: the -W check has read the file back through the cache. */
	if (phase == IOR_PHASE_READ && p->drop_cache && !failed(t))
		drop_own_cache(t, path);

	barrier(t);
	ts[IOR_T_OPEN_START] = now_s();
	if (!failed(t)) {
		ret = ior_file_open(t->io, path, phase == IOR_PHASE_WRITE, p->direct, &f);
		if (ret < 0)
			set_error(t, "open", path, -1, -ret);
	}
	ts[IOR_T_OPEN_END] = now_s();

	barrier(t);
	ts[IOR_T_XFER_START] = now_s();
	if (f && !failed(t)) {
		int check = phase == IOR_PHASE_READ && p->check_read ? IOR_PHASE_READ : -1;
		uint64_t count = phase == IOR_PHASE_WRITE ? ior_xfers_per_task(p) :
			readable_xfers(t, owner, iter);
		double deadline = p->stonewall > 0 ? ts[IOR_T_XFER_START] + p->stonewall : 0;
		int64_t done = transfer_all(t, f, phase, owner, check, iter, path, count, deadline,
					    xfer_sum);

		if (done >= 0)
			t->res->moved[slot] = (uint64_t)done;
		if (done >= 0 && phase == IOR_PHASE_WRITE && p->fsync) {
			ret = ior_file_fsync(f);
			if (ret < 0)
				set_error(t, "fsync", path, -1, -ret);
		}
	}
	ts[IOR_T_XFER_END] = now_s();

	barrier(t);
	ts[IOR_T_CLOSE_START] = now_s();
	if (f) {
		ret = ior_file_close(f);
		if (ret < 0)
			set_error(t, "close", path, -1, -ret);
	}
	ts[IOR_T_CLOSE_END] = now_s();

	if (phase == IOR_PHASE_WRITE && p->drop_cache && !failed(t) &&
	    (p->file_per_proc || t->id == 0))
		drop_own_cache(t, path);
}

/* -W: read back what was just written (by the -C neighbour) and compare. */
static void check_write(struct ior_task *t, int iter)
{
	int owner = ior_read_source(t->p, t->id);
	char path[IOR_PATH_MAX];
	struct ior_file *f;
	double ignored = 0;
	int ret;

	barrier(t);
	if (failed(t))
		return;
	ior_task_path(t->p, owner, path, sizeof(path));
	ret = ior_file_open(t->io, path, 0, t->p->direct, &f);
	if (ret < 0) {
		set_error(t, "open", path, -1, -ret);
		return;
	}
	transfer_all(t, f, IOR_PHASE_READ, owner, IOR_PHASE_WRITE, iter, path,
		     readable_xfers(t, owner, iter), 0, &ignored);
	ior_file_close(f);
}

/* Remove the test file(s) before a write phase and after a repetition (IOR's default). */
static void remove_files(struct ior_task *t)
{
	char path[IOR_PATH_MAX];
	int ret;

	barrier(t);
	if (!failed(t) && (t->p->file_per_proc || t->id == 0)) {
		ior_task_path(t->p, t->id, path, sizeof(path));
		ret = ior_path_unlink(t->io, path);
		if (ret < 0 && ret != -ENOENT)
			set_error(t, "unlink", path, -1, -ret);
	}
	barrier(t);
}

int ior_task_main(const struct ior_params *p, struct ior_shared *sh, int task)
{
	struct ior_task t = { .p = p, .sh = sh, .res = &sh->task[task], .id = task,
			      .order_owner = -1 };
	char err[400];
	int iter;

	/* Page-aligned so O_DIRECT accepts it. */
	if (posix_memalign(&t.buf, 4096, p->xfer) != 0)
		t.buf = NULL;
	t.order = malloc(sizeof(*t.order) * ior_xfers_per_task(p));
	if (!t.buf || !t.order)
		snprintf(t.res->error, sizeof(t.res->error), "task %d: out of memory for a %llu-byte buffer",
			 task, (unsigned long long)p->xfer);
	else if (ior_backend_open(p, &t.io, err, sizeof(err)) < 0)
		snprintf(t.res->error, sizeof(t.res->error), "task %d: %s", task, err);
	for (iter = 0; iter < p->reps; iter++) {
		if (p->write) {
			remove_files(&t);
			timed_phase(&t, iter, IOR_PHASE_WRITE);
			if (p->check_write)
				check_write(&t, iter);
		}
		if (p->read) {
			if (p->write && p->drop_cache_cmd)
				drop_cache_cmd(&t);
			timed_phase(&t, iter, IOR_PHASE_READ);
		}
		if (!p->keep)
			remove_files(&t);
	}
	ior_backend_close(t.io);
	free(t.order);
	free(t.buf);
	return failed(&t) ? 1 : 0;
}

/* Wait for every task; if one dies abnormally, stop the others (they would wait at a barrier). */
int ior_wait_tasks(pid_t *pids, int n, const char *prog)
{
	int left = n, failed = 0, status, i;
	pid_t pid;

	while (left > 0) {
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < n; i++)
			if (pids[i] == pid)
				break;
		if (i == n)
			continue;
		pids[i] = 0;
		left--;
		if (WIFSIGNALED(status)) {
			fprintf(stderr, "%s: task %d killed by signal %d\n", prog, i, WTERMSIG(status));
			failed = 1;
			for (i = 0; i < n; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGKILL);
		} else if (WEXITSTATUS(status) != 0) {
			failed = 1;
		}
	}
	return failed;
}
