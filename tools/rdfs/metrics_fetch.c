// SPDX-License-Identifier: MIT
/*
 * metrics_fetch.c - what `rdfs metrics` and `rdfs top` share: the metrics URL
 * the configuration implies, and one bounded HTTP GET into memory (libcurl).
 * Single-threaded; the caller owns the CURL handle and the returned body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

/* Refuse an endpoint that sends more than this: a server's page is tens of KiB. */
#define MAX_BYTES (64u << 20)

struct sink {
	char *buf;
	size_t len, cap;
	int too_big;
};

static size_t to_memory(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;

	if (s->len + add > MAX_BYTES) {
		s->too_big = 1;
		return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
	}
	if (s->len + add + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 65536;
		char *b;

		while (cap < s->len + add + 1)
			cap *= 2;
		b = realloc(s->buf, cap);
		if (!b)
			return 0;
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, p, add);
	s->len += add;
	s->buf[s->len] = '\0';
	return n;
}

int metrics_default_url(const struct rdfs_config *cfg, char *buf, size_t len)
{
	const char *url = config_get(cfg, "rdfs", "metrics_url", NULL);
	const char *listen, *colon;

	if (url && *url)
		return snprintf(buf, len, "%s", url) < (int)len ? 0 : -1;
	listen = config_get(cfg, "metaserver", "metrics_listen",
			    config_get(cfg, "metrics", "listen", NULL));
	if (!listen || !*listen || !(colon = strrchr(listen, ':')))
		return -1;
	if (colon == listen || !strncmp(listen, "0.0.0.0:", 8) || !strncmp(listen, "[::]:", 5))
		return snprintf(buf, len, "http://127.0.0.1%s/metrics", colon) < (int)len ? 0 : -1;
	return snprintf(buf, len, "http://%s/metrics", listen) < (int)len ? 0 : -1;
}

int metrics_get(CURL *c, const char *url, int timeout_ms, char **body, size_t *len, char *why,
		size_t whylen)
{
	struct sink s = { 0 };
	char err[CURL_ERROR_SIZE] = "";
	CURLcode rc;

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_memory);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s",
			 s.too_big ? "more than 64 MiB: not a metrics page" :
			 err[0]	   ? err :
				     curl_easy_strerror(rc));
		free(s.buf);
		return -1;
	}
	*body = s.buf ? s.buf : strdup("");
	*len = s.len;
	return *body ? 0 : -1;
}
