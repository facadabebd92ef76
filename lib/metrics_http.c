// SPDX-License-Identifier: MIT
/*
 * metrics_http.c - the /metrics endpoint on libmicrohttpd (see metrics_http.h).
 *
 * Every request is answered on its first callback, before any body is read:
 * a GET has none, and anything else is refused, so there is no per-request
 * state and nothing an upload can grow.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "log.h"
#include "metrics_http.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http {
	struct metrics *reg;
	struct MHD_Daemon *d;
	char url[320];
};

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int code, const char *text)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct metrics_http *h = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *text;
	size_t len;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/metrics"))
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
	if (metrics_render(h->reg, &text, &len))
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" into @host (empty: any) and @port. */
static int split_listen(const char *s, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon;
	size_t n;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		n = (size_t)(end - s - 1);
		s++;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL; /* a bare IPv6 address needs its brackets */
		n = (size_t)(colon - s);
	}
	if (n >= hlen || !colon[1] || strlen(colon + 1) >= plen ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

int metrics_http_start(struct metrics *r, const char *listen, struct metrics_http **out)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char host[256], port[16], shown[270];
	const union MHD_DaemonInfo *info;
	struct metrics_http *h;
	unsigned int flags;
	int ret;

	if (!listen || split_listen(listen, host, sizeof(host), port, sizeof(port)) ||
	    atoi(port) > 65535) {
		log_error(1000001, "metrics: bad listen address '%s' (HOST:PORT)",
			  listen ? listen : "");
		return -EINVAL;
	}
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	ret = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
	if (ret) {
		log_error(1000002, "metrics: cannot resolve '%s': %s", listen, gai_strerror(ret));
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	h->reg = r;
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)METRICS_HTTP_MAX_CONNS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)METRICS_HTTP_MAX_PER_IP,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)METRICS_HTTP_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_HTTP_CONN_MEMORY,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)METRICS_HTTP_MAX_CONNS,
		MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!h->d) {
		/* libmicrohttpd leaves errno at the failed call (bind: EADDRINUSE) */
		ret = errno ? -errno : -EIO;
		log_error(1000003, "metrics: cannot listen on %s: %s", listen, strerror(-ret));
		free(h);
		return ret;
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	if (!host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "::"))
		snprintf(shown, sizeof(shown), "127.0.0.1");
	else if (strchr(host, ':'))
		snprintf(shown, sizeof(shown), "[%s]", host);
	else
		snprintf(shown, sizeof(shown), "%s", host);
	snprintf(h->url, sizeof(h->url), "http://%s:%u/metrics", shown,
		 info ? (unsigned int)info->port : (unsigned int)atoi(port));
	*out = h;
	return 0;
}

const char *metrics_http_url(const struct metrics_http *h)
{
	return h->url;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
