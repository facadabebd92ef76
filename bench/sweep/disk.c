// SPDX-License-Identifier: MIT
/*
 * disk.c - the first limit: the volume file's own read rate at each request
 * size, O_DIRECT, one request (or --depth threads' worth) outstanding, over the
 * very blocks that hold the test file (a sparse volume's holes would read
 * without touching the disk).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"

struct disk_job {
	int fd;
	uint64_t vol_off;
	uint64_t file_offset;
	uint64_t len;
	void *buf;
	int err;
};

static int pread_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		done += (uint64_t)n;
	}
	return 0;
}

static void *disk_job_main(void *arg)
{
	struct disk_job *j = arg;

	j->err = pread_full(j->fd, j->buf, j->len, j->vol_off);
	return NULL;
}

/*
 * One size: batches of depth preads run at once (depth 1: plain back-to-back
 * preads, which is gmblock's local-ram curve).
 */
static int disk_one_size(int fd, struct sweep_walk *w, const struct sweep_plan *p,
			 uint64_t size, void **bufs, struct sweep_result *r)
{
	uint64_t n = plan_requests(p, size), done = 0;
	struct disk_job jobs[64];
	pthread_t th[64];
	int threaded[64];
	double t0, verify_s = 0;
	int ret = 0, k, nj;

	memset(r, 0, sizeof(*r));
	r->request_bytes = size;
	t0 = now_seconds();
	while (done < n && !ret) {
		for (nj = 0; nj < p->depth && done + nj < n; nj++) {
			const struct sweep_run *run = walk_next(w, size, &jobs[nj].file_offset);

			if (!run)
				return -ENOSPC;
			jobs[nj].fd = fd;
			jobs[nj].len = size;
			jobs[nj].buf = bufs[nj];
			jobs[nj].vol_off = SWEEP_VOLUME_DATA_OFFSET +
				(run->block * SWEEP_BLOCK) + (jobs[nj].file_offset - run->file_offset);
		}
		if (nj == 1) {
			disk_job_main(&jobs[0]);
		} else {
			for (k = 0; k < nj; k++) {
				threaded[k] = pthread_create(&th[k], NULL, disk_job_main,
							     &jobs[k]) == 0;
				if (!threaded[k])
					disk_job_main(&jobs[k]);
			}
			for (k = 0; k < nj; k++)
				if (threaded[k])
					pthread_join(th[k], NULL);
		}
		for (k = 0; k < nj && !ret; k++) {
			double v0 = now_seconds();

			ret = jobs[k].err;
			if (ret)
				fprintf(stderr, "rdfs-sweep: pread of the volume at %llu: %s\n",
					(unsigned long long)jobs[k].vol_off, strerror(-ret));
			else if (p->verify)
				ret = pattern_check(jobs[k].buf, size, jobs[k].file_offset, p->seed,
						    "pread of the volume file");
			verify_s += now_seconds() - v0;
		}
		done += nj;
		r->bytes += nj * size;
	}
	r->seconds = now_seconds() - t0 - verify_s;
	r->requests = done;
	result_finish(r);
	return ret;
}

int sweep_disk(struct sweep_env *env, const struct sweep_plan *p)
{
	struct sweep_target t;
	struct sweep_walk w;
	void *bufs[64] = { 0 };
	const char *how = "O_DIRECT";
	uint64_t start;
	int fd, i, ret = 0;

	if (!env->volume) {
		fprintf(stderr, "rdfs-sweep: disk needs --volume (the I/O server's volume file)\n");
		return SWEEP_USAGE;
	}
	if (p->depth > 64) {
		fprintf(stderr, "rdfs-sweep: disk: --depth is at most 64\n");
		return SWEEP_USAGE;
	}
	ret = target_open(env, &t);
	if (ret)
		return SWEEP_FAIL;
	fd = open(env->volume, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		/* tmpfs: no O_DIRECT; drop the cache instead and say so */
		fd = open(env->volume, O_RDONLY | O_CLOEXEC);
		how = "buffered, cache dropped";
		fprintf(stderr, "rdfs-sweep: %s refuses O_DIRECT; reading it buffered after "
			"dropping its cached pages\n", env->volume);
	}
	if (fd < 0) {
		fprintf(stderr, "rdfs-sweep: cannot open %s: %s\n", env->volume, strerror(errno));
		target_free(&t);
		return SWEEP_FAIL;
	}
	for (i = 0; i < p->depth && !ret; i++)
		if (posix_memalign(&bufs[i], SWEEP_BLOCK, p->sizes[p->nsizes - 1]))
			ret = -ENOMEM;
	start = (uint64_t)p->pass * plan_pass_bytes(p);
	walk_init(&w, &t, start, start + plan_pass_bytes(p));
	target_drop_volume_cache(env);
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r;

		ret = disk_one_size(fd, &w, p, p->sizes[i], bufs, &r);
		if (!ret) {
			char extra[128];

			snprintf(extra, sizeof(extra), "\"io\": \"%s\", \"pass\": %d", how, p->pass);
			result_emit(env, p, &r, extra);
		}
	}
	for (i = 0; i < p->depth; i++)
		free(bufs[i]);
	close(fd);
	target_free(&t);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
