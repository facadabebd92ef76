/* SPDX-License-Identifier: MIT */
/*
 * metrics_http.h - serve a metrics registry over HTTP for Prometheus
 * (libmicrohttpd): GET or HEAD /metrics answers the text format, any other
 * path 404, any other method 405.
 *
 * Threads: libmicrohttpd's own polling thread accepts, reads and writes every
 * connection without blocking, and renders the registry on it; the server's
 * request threads never wait for a scraper. A scraper that sends nothing or
 * garbage, or never reads, costs one connection slot until the connection
 * timeout: at most METRICS_HTTP_MAX_CONNS connections (METRICS_HTTP_MAX_PER_IP
 * from one address), each with METRICS_HTTP_CONN_MEMORY bytes for its request.
 * The registry must outlive the endpoint.
 */
#ifndef RDFS_METRICS_HTTP_H
#define RDFS_METRICS_HTTP_H

#include <stddef.h>

#include "metrics.h"

/* Prometheus scrapes one connection at a time; a few more for people and rdfs top. */
#define METRICS_HTTP_MAX_CONNS	16
#define METRICS_HTTP_MAX_PER_IP 8
/* Seconds a connection may stay idle (nothing read from it, nothing written). */
#define METRICS_HTTP_TIMEOUT_S 10
/* A GET with its headers fits well inside; anything larger is refused. */
#define METRICS_HTTP_CONN_MEMORY 16384

struct metrics_http;

/*
 * Listen on @listen, "HOST:PORT" ("0.0.0.0:9100", "[::1]:9100", ":9100" for
 * every address; port 0 picks one), and serve @r. 0, -EINVAL for an address
 * that does not parse or resolve, -EADDRINUSE or another -errno when the
 * server cannot start (logged here, with the address).
 */
int metrics_http_start(struct metrics *r, const char *listen, struct metrics_http **out);
/*
 * The URL scrapers reach it at: "http://HOST:PORT/metrics", with the bound
 * port and a wildcard host replaced by 127.0.0.1 (as an I/O server's
 * derived advertise URL: right on one machine; give a host to listen on
 * for a URL other hosts can use).
 */
const char *metrics_http_url(const struct metrics_http *h);
/* Stop serving (waits for the polling thread) and free; NULL is fine. */
void metrics_http_stop(struct metrics_http *h);

#endif
