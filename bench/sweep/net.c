// SPDX-License-Identifier: MIT
/*
 * net.c - the second limit: the loopback TCP rate for the READ pattern itself.
 * A responder thread answers each ~100-byte request with a 24-byte header and
 * N bytes from memory (no disk, no protocol stack of ours), one connection,
 * TCP_NODELAY, --depth requests outstanding: what any server could at best do
 * over this network for requests of this size.
 *
 * With --net-ns the responder's socket lives in that network namespace (bound
 * to --net-addr), so the replies cross whatever link leads there: the rate
 * limited veth of bench/sweep/run's "net-ratelimited". Only the socket is
 * created there (setns on this thread, then back); a socket keeps its
 * namespace, so the threads need no namespace of their own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sweep.h"

#define NET_REQ_LEN	104		/* about an IoReq with its capability and frame header */
#define NET_HDR_LEN	24

struct responder {
	int listen_fd;
	uint8_t *data;
	uint64_t max;
};

static int write_full(int fd, const struct iovec *iov0, int niov)
{
	struct iovec iov[2];
	int i = 0;

	memcpy(iov, iov0, niov * sizeof(*iov));
	while (i < niov) {
		ssize_t n = writev(fd, iov + i, niov - i);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		while (i < niov && (size_t)n >= iov[i].iov_len)
			n -= iov[i++].iov_len;
		if (i < niov) {
			iov[i].iov_base = (char *)iov[i].iov_base + n;
			iov[i].iov_len -= n;
		}
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = recv(fd, (char *)buf + done, len - done, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		done += (size_t)n;
	}
	return 0;
}

static void *responder_main(void *arg)
{
	struct responder *r = arg;
	uint8_t req[NET_REQ_LEN], hdr[NET_HDR_LEN] = { 0 };
	int one = 1, fd;

	fd = accept(r->listen_fd, NULL, NULL);
	if (fd < 0)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (read_full(fd, req, sizeof(req)) == 0) {
		uint64_t len;
		struct iovec iov[2];

		memcpy(&len, req, sizeof(len));
		if (len > r->max)
			break;
		memcpy(hdr, &len, sizeof(len));
		iov[0].iov_base = hdr;
		iov[0].iov_len = sizeof(hdr);
		iov[1].iov_base = r->data;
		iov[1].iov_len = len;
		if (write_full(fd, iov, 2))
			break;
	}
	close(fd);
	return NULL;
}

static int send_req(int fd, uint64_t len)
{
	uint8_t req[NET_REQ_LEN] = { 0 };
	struct iovec iov = { req, sizeof(req) };

	memcpy(req, &len, sizeof(len));
	return write_full(fd, &iov, 1);
}

static int recv_reply(int fd, void *buf, uint64_t len)
{
	uint8_t hdr[NET_HDR_LEN];
	uint64_t got;
	int ret = read_full(fd, hdr, sizeof(hdr));

	if (ret)
		return ret;
	memcpy(&got, hdr, sizeof(got));
	if (got != len)
		return -EPROTO;
	return read_full(fd, buf, len);
}

static int net_one_size(int fd, const struct sweep_plan *p, uint64_t size, void *buf,
			struct sweep_result *r)
{
	uint64_t n = plan_requests(p, size), started = 0, done = 0;
	double t0;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	r->request_bytes = size;
	t0 = now_seconds();
	while (done < n && !ret) {
		while (!ret && started < n && started - done < (uint64_t)p->depth) {
			ret = send_req(fd, size);
			started++;
		}
		if (!ret)
			ret = recv_reply(fd, buf, size);
		done++;
	}
	r->seconds = now_seconds() - t0;
	r->requests = done;
	r->bytes = done * size;
	result_finish(r);
	return ret;
}

/* The path of network namespace @ns: a path as is, else a name under /run/netns. */
static void netns_path(const char *ns, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", strchr(ns, '/') ? "" : "/run/netns/", ns);
}

/*
 * A listening socket bound to @sa, created in network namespace @ns (NULL:
 * ours). 0 or -errno; this thread is back in its own namespace either way.
 */
static int responder_listen(const char *ns, struct sockaddr_in *sa, int *out)
{
	socklen_t salen = sizeof(*sa);
	int self = -1, target = -1, fd = -1, ret = 0;
	char path[4096];

	if (ns) {
		netns_path(ns, path, sizeof(path));
		self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || target < 0) {
			ret = -errno;
			fprintf(stderr, "rdfs-sweep: net: cannot open network namespace %s: %s\n",
				self < 0 ? "/proc/thread-self/ns/net" : path, strerror(errno));
			goto out;
		}
		if (setns(target, CLONE_NEWNET)) {
			ret = -errno;
			fprintf(stderr, "rdfs-sweep: net: cannot enter network namespace %s: %s\n",
				path, strerror(errno));
			goto out;
		}
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)sa, sizeof(*sa)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)sa, &salen))
		ret = -errno;
	if (ns && setns(self, CLONE_NEWNET)) {
		/* the connection would come from the wrong side: give up */
		fprintf(stderr, "rdfs-sweep: net: cannot return to our network namespace: %s\n",
			strerror(errno));
		ret = -errno;
	}
out:
	if (self >= 0)
		close(self);
	if (target >= 0)
		close(target);
	if (ret && fd >= 0)
		close(fd);
	*out = ret ? -1 : fd;
	return ret;
}

int sweep_net(struct sweep_env *env, const struct sweep_plan *p)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct responder rs = { .listen_fd = -1 };
	pthread_t th;
	int fd = -1, one = 1, i, ret = 0, started = 0;
	char io[320];
	void *buf = NULL;

	rs.max = p->sizes[p->nsizes - 1];
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (env->net_addr && inet_pton(AF_INET, env->net_addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "rdfs-sweep: net: --net-addr '%s' is not an IPv4 address\n",
			env->net_addr);
		return SWEEP_USAGE;
	}
	ret = responder_listen(env->net_ns, &sa, &rs.listen_fd);
	if (ret)
		goto out;
	if (env->net_ns)
		snprintf(io, sizeof(io), "\"io\": \"TCP to %s in network namespace %s, reply "
			 "from memory\"", env->net_addr ? env->net_addr : "127.0.0.1", env->net_ns);
	else
		snprintf(io, sizeof(io), "\"io\": \"loopback TCP, reply from memory\"");
	if (posix_memalign((void **)&rs.data, SWEEP_BLOCK, rs.max) ||
	    posix_memalign(&buf, SWEEP_BLOCK, rs.max)) {
		ret = -ENOMEM;
		goto out;
	}
	memset(rs.data, 0x5a, rs.max);
	if (pthread_create(&th, NULL, responder_main, &rs)) {
		ret = -EAGAIN;
		goto out;
	}
	started = 1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		goto out;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (i = 0; i < p->nsizes && !ret; i++) {
		struct sweep_result r;

		ret = net_one_size(fd, p, p->sizes[i], buf, &r);
		if (!ret)
			result_emit(env, p, &r, io);
	}
out:
	if (ret)
		fprintf(stderr, "rdfs-sweep: net: %s\n", strerror(-ret));
	if (fd >= 0)
		close(fd);		/* the responder sees EOF and ends */
	if (started) {
		/* wakes a responder still in accept() (our connect failed) */
		shutdown(rs.listen_fd, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	if (rs.listen_fd >= 0)
		close(rs.listen_fd);
	free(rs.data);
	free(buf);
	return ret ? SWEEP_FAIL : SWEEP_OK;
}
