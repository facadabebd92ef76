// SPDX-License-Identifier: MIT
/*
 * netdelay.c - a fixed delay for the packets of one NFQUEUE queue: what
 * `tc netem delay` does, on kernels without sch_netem (deploy/netns-cluster
 * degrade --delay starts one per network namespace, behind an iptables
 * `-j NFQUEUE --queue-num N --queue-bypass` rule on OUTPUT).
 *
 *   netdelay --queue N --delay MS [--limit PACKETS]
 *
 * Contract:
 *  - Every packet the kernel queues to N is given back (NF_ACCEPT) DELAY after
 *    netdelay read it from the queue's socket, in the order the kernel queued
 *    them (its packet ids): no reordering, no jitter of its own. A packet's
 *    wait starts when netdelay reads it, so a busy CPU adds to the delay, and
 *    the timer wakes within microseconds (timer slack 1 us), not exactly.
 *  - At most LIMIT packets are held (default 20000). A packet that finds the
 *    queue full is dropped (NF_DROP) and counted, as a full netem queue would.
 *    The kernel's own queue for N is LIMIT plus what is in flight to us.
 *  - The queue is bound to copy metadata only (no payload is copied) and, where
 *    the kernel allows, GSO packets are queued whole (NFQA_CFG_F_GSO).
 *  - Once the queue is bound it prints "netdelay: queue N ready" on stdout: a
 *    starter adds its rule after that line (or when N is in
 *    /proc/PID/net/netfilter/nfnetlink_queue).
 *  - SIGTERM or SIGINT: every held packet is given back at once (early, never
 *    lost), the queue is unbound, the counters are printed on stderr, exit 0.
 *  - Exit 1 when the queue cannot be bound (no CAP_NET_ADMIN, N served by
 *    another process), 2 on a usage error.
 * Packets a message of the kernel's never reached us for (the socket overran:
 * counted as "overruns") are given back with the next later packet's verdict,
 * which covers every id up to its own (nfq_set_verdict_batch).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define DEFAULT_LIMIT 20000
#define MAX_LIMIT     (1u << 22)
/* Room for a burst of queued-packet messages between two turns of the loop. */
#define SOCK_RCVBUF (8u << 20)
#define NS_PER_SEC  1000000000ull

struct held {
	uint32_t id;  /* the kernel's packet id, which orders the queue */
	uint64_t due; /* CLOCK_MONOTONIC ns at which it is given back */
};

/* The packets held, oldest first: a ring of cap entries. */
struct delay_queue {
	struct held *ring;
	uint32_t cap;
	uint32_t head; /* index of the oldest */
	uint32_t len;
	uint64_t delay_ns;
	uint64_t passed;	 /* given back after their delay (or at exit) */
	uint64_t dropped;	 /* found the ring full */
	uint64_t overruns;	 /* ENOBUFS: the socket lost messages */
	uint64_t verdict_errors; /* a verdict not sent (its packets wait for the next) */
	struct nfq_q_handle *qh;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	stopping = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* A packet read from the queue: held until its due time, or dropped when full. */
static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
	struct delay_queue *q = arg;
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	uint32_t id;

	if (!ph)
		return 0;
	id = ntohl(ph->packet_id);
	if (q->len == q->cap) {
		q->dropped++;
		return nfq_set_verdict(qh, id, NF_DROP, 0, NULL) < 0 ? -1 : 0;
	}
	q->ring[(q->head + q->len) % q->cap] = (struct held){ .id = id,
							      .due = now_ns() + q->delay_ns };
	q->len++;
	return 0;
}

/*
 * Give back every packet due by @now (all of them if @all): one verdict for the
 * newest, which the kernel applies to every id up to it, in order.
 */
static void release_due(struct delay_queue *q, uint64_t now, int all)
{
	uint32_t n = 0, last = 0;

	while (q->len && (all || q->ring[q->head].due <= now)) {
		last = q->ring[q->head].id;
		q->head = (q->head + 1) % q->cap;
		q->len--;
		n++;
	}
	if (!n)
		return;
	q->passed += n;
	if (nfq_set_verdict_batch(q->qh, last, NF_ACCEPT) < 0)
		q->verdict_errors++;
}

/* Read every message the socket holds now; -1 on an error other than an overrun. */
static int drain_socket(struct nfq_handle *h, struct delay_queue *q, char *buf, size_t size)
{
	int fd = nfq_fd(h);

	for (;;) {
		ssize_t n = recv(fd, buf, size, MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == ENOBUFS) {
			q->overruns++;
			continue;
		}
		if (n < 0) {
			fprintf(stderr, "netdelay: recv: %s\n", strerror(errno));
			return -1;
		}
		nfq_handle_packet(h, buf, (int)n);
	}
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: netdelay --queue N --delay MS [--limit PACKETS]\n"
		"  Gives back every packet of NFQUEUE queue N (NF_ACCEPT) MS milliseconds\n"
		"  (a fraction allowed) after it arrived, in order; holds at most PACKETS\n"
		"  (default %d) and drops what finds them full. SIGTERM gives back what\n"
		"  it holds and exits; the counters go to stderr.\n",
		DEFAULT_LIMIT);
}

static int parse_args(int argc, char **argv, unsigned *queue, uint64_t *delay_ns, uint32_t *limit)
{
	static const struct option opts[] = {
		{ "queue", required_argument, NULL, 'q' },
		{ "delay", required_argument, NULL, 'd' },
		{ "limit", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, have_q = 0, have_d = 0;
	char *end;

	while ((opt = getopt_long(argc, argv, "q:d:l:h", opts, NULL)) != -1) {
		unsigned long v;
		double ms;

		switch (opt) {
		case 'q':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || v > 65535)
				return -1;
			*queue = (unsigned)v;
			have_q = 1;
			break;
		case 'd':
			errno = 0;
			ms = strtod(optarg, &end);
			if (errno || *end || end == optarg || !(ms >= 0 && ms <= 60000))
				return -1;
			*delay_ns = (uint64_t)(ms * 1e6);
			have_d = 1;
			break;
		case 'l':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 || v > MAX_LIMIT)
				return -1;
			*limit = (uint32_t)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	return have_q && have_d && optind == argc ? 0 : -1;
}

/* The next due time as a timeout for ppoll, or NULL to wait for packets only. */
static struct timespec *next_timeout(const struct delay_queue *q, struct timespec *ts)
{
	uint64_t now, due;

	if (!q->len)
		return NULL;
	now = now_ns();
	due = q->ring[q->head].due;
	due = due > now ? due - now : 0;
	ts->tv_sec = (time_t)(due / NS_PER_SEC);
	ts->tv_nsec = (long)(due % NS_PER_SEC);
	return ts;
}

int main(int argc, char **argv)
{
	static char buf[1 << 16] __attribute__((aligned));
	struct delay_queue q = { .cap = DEFAULT_LIMIT };
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t block, during_poll;
	struct nfq_handle *h;
	unsigned queue = 0;
	int status = 0;

	if (parse_args(argc, argv, &queue, &q.delay_ns, &q.cap) < 0) {
		usage(stderr);
		return 2;
	}
	q.ring = calloc(q.cap, sizeof(*q.ring));
	if (!q.ring) {
		fprintf(stderr, "netdelay: no memory for %u packets\n", q.cap);
		return 1;
	}
	/* The signals arrive only inside ppoll, so no turn of the loop is cut short. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &during_poll);
	sigdelset(&during_poll, SIGTERM);
	sigdelset(&during_poll, SIGINT);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	h = nfq_open();
	if (!h) {
		fprintf(stderr, "netdelay: nfq_open: %s\n", strerror(errno));
		return 1;
	}
	q.qh = nfq_create_queue(h, (uint16_t)queue, on_packet, &q);
	if (!q.qh) {
		fprintf(stderr, "netdelay: cannot bind queue %u: %s\n", queue, strerror(errno));
		nfq_close(h);
		return 1;
	}
	if (nfq_set_mode(q.qh, NFQNL_COPY_META, 0) < 0 ||
	    nfq_set_queue_maxlen(q.qh, q.cap + 4096) < 0) {
		fprintf(stderr, "netdelay: cannot set up queue %u: %s\n", queue, strerror(errno));
		nfq_destroy_queue(q.qh);
		nfq_close(h);
		return 1;
	}
	/* Older kernels refuse the flag: then GSO packets are segmented first. */
	nfq_set_queue_flags(q.qh, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
	nfnl_rcvbufsiz(nfq_nfnlh(h), SOCK_RCVBUF);
	printf("netdelay: queue %u ready, delay %.3f ms, limit %u\n", queue,
	       (double)q.delay_ns / 1e6, q.cap);
	fflush(stdout);

	while (!stopping) {
		struct pollfd pfd = { .fd = nfq_fd(h), .events = POLLIN };
		struct timespec ts;
		int n = ppoll(&pfd, 1, next_timeout(&q, &ts), &during_poll);

		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "netdelay: ppoll: %s\n", strerror(errno));
			status = 1;
			break;
		}
		if (n > 0 && drain_socket(h, &q, buf, sizeof(buf)) < 0) {
			status = 1;
			break;
		}
		release_due(&q, now_ns(), 0);
	}
	/* What is still in the socket too: the unbind drops what has no verdict. */
	if (!status)
		drain_socket(h, &q, buf, sizeof(buf));
	release_due(&q, 0, 1);
	fprintf(stderr,
		"netdelay: queue %u: %llu packets delayed, %llu dropped (queue full), "
		"%llu socket overruns, %llu verdicts not sent\n",
		queue, (unsigned long long)q.passed, (unsigned long long)q.dropped,
		(unsigned long long)q.overruns, (unsigned long long)q.verdict_errors);
	nfq_destroy_queue(q.qh);
	nfq_close(h);
	free(q.ring);
	return status;
}
