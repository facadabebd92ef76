// SPDX-License-Identifier: MIT
/*
 * groups_cache.c - a FUSE request's caller's supplementary groups without
 * reading /proc for every request.
 *
 * FUSE requests carry the caller's uid, gid and thread id, not its groups;
 * libfuse's fuse_req_getgroups() reads them from /proc/TID/task/TID/status,
 * which the kernel renders in full each time (signal masks, memory, ...): an
 * open, a read and a close that cost more CPU than the rest of a LOOKUP. So
 * the groups read for a thread are remembered for groups_timeout seconds
 * (default 1), keyed by the thread id together with its uid and gid: a
 * thread that changes its uid or gid is read afresh at once. What the window
 * allows: a thread that drops supplementary groups with setgroups(2) alone
 * and keeps its uid and gid keeps them here for up to groups_timeout, and so
 * would a new process of the same uid and gid given a reused thread id
 * (pid_max is often 32768), but each entry holds a pidfd of the thread it
 * was read for and is used only while that very process lives
 * (pidfd_send_signal with signal 0: ESRCH once it is gone, before its id can
 * be reused). pidfd_open() takes thread-group leaders only (Linux < 6.9), so
 * the other threads of a multithreaded caller are read every time. NFS
 * servers that resolve groups themselves (--manage-gids) keep them for much
 * longer; groups_timeout=0 reads them for every request, as before.
 *
 * Threads: any session worker. One mutex guards the table; it is held for
 * the lookup and the copy, never across the read from /proc. A table entry
 * is a slot picked by the thread id (a collision replaces the older one).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fuse_metrics.h"
#include "groups_cache.h"

#define GROUPS_CACHE_SLOTS 256

struct groups_slot {
	pid_t tid; /* 0: empty */
	int pidfd; /* of that thread's process, when tid is not 0 */
	uid_t uid;
	gid_t gid;
	int n;
	int64_t expires_ns; /* CLOCK_MONOTONIC */
	gid_t groups[RDFS_MAX_GROUPS];
};

static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static struct groups_slot groups_slots[GROUPS_CACHE_SLOTS];
static int64_t groups_ttl_ns = 1000000000;

void groups_cache_set_timeout(double seconds)
{
	/* an hour at most: and no conversion of inf or nan */
	if (!(seconds > 0))
		seconds = 0;
	else if (seconds > 3600)
		seconds = 3600;
	groups_ttl_ns = (int64_t)(seconds * 1e9);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Is the process @pidfd names still there (its thread id not free for reuse)? */
static int pidfd_alive(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
}

/* Read them from /proc: their count, or -errno (the caller has exited). */
static int groups_read(fuse_req_t req, gid_t *groups, int max)
{
	int n = fuse_req_getgroups(req, max, groups);

	fuse_metrics_groups_read();
	return n > max ? max : n;
}

int groups_cache_get(fuse_req_t req, gid_t *groups, int max)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct groups_slot *s = &groups_slots[(uint32_t)ctx->pid % GROUPS_CACHE_SLOTS];
	int64_t now;
	int n, pidfd;

	if (max > RDFS_MAX_GROUPS)
		max = RDFS_MAX_GROUPS;
	if (groups_ttl_ns <= 0 || ctx->pid <= 0) {
		n = groups_read(req, groups, max);
		return n < 0 ? 0 : n;
	}
	now = mono_ns();
	pthread_mutex_lock(&groups_lock);
	if (s->tid == ctx->pid && s->uid == ctx->uid && s->gid == ctx->gid && now < s->expires_ns &&
	    pidfd_alive(s->pidfd)) {
		n = s->n < max ? s->n : max;
		memcpy(groups, s->groups, n * sizeof(gid_t));
		pthread_mutex_unlock(&groups_lock);
		return n;
	}
	pthread_mutex_unlock(&groups_lock);

	/* before the read: a pidfd of a process that dies meanwhile fails the next check */
	pidfd = (int)syscall(SYS_pidfd_open, ctx->pid, 0);
	n = groups_read(req, groups, max);
	/* an exited caller gets no groups (they can only deny), and nothing is kept */
	if (n < 0 || pidfd < 0) {
		if (pidfd >= 0)
			close(pidfd);
		return n < 0 ? 0 : n;
	}
	pthread_mutex_lock(&groups_lock);
	if (s->tid)
		close(s->pidfd);
	s->pidfd = pidfd;
	s->tid = ctx->pid;
	s->uid = ctx->uid;
	s->gid = ctx->gid;
	s->n = n;
	s->expires_ns = now + groups_ttl_ns;
	memcpy(s->groups, groups, n * sizeof(gid_t));
	pthread_mutex_unlock(&groups_lock);
	return n;
}
