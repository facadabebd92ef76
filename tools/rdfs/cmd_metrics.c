// SPDX-License-Identifier: MIT
/*
 * cmd_metrics.c - `rdfs metrics`: print the Prometheus metrics of rdfs servers,
 * fetched over HTTP with libcurl. One-shot, single-threaded; needs no key and
 * no metaserver connection (the endpoints are plain HTTP, as Prometheus
 * scrapes them).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "tool.h"

#define MAX_URLS 32
/* Refuse an endpoint that sends more than this: a server's page is tens of KiB. */
#define MAX_BYTES (64u << 20)

struct sink {
	size_t bytes;
};

static size_t to_stdout(char *p, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;

	s->bytes += n;
	if (s->bytes > MAX_BYTES)
		return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
	return fwrite(p, size, n, stdout);
}

/*
 * The URL the configuration implies: [rdfs] metrics_url, else the endpoint
 * the metaserver of this host serves ([metaserver] metrics_listen, else
 * [metrics] listen), a wildcard host read as 127.0.0.1.
 */
static int default_url(const struct rdfs_config *cfg, char *buf, size_t len)
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

static int fetch(CURL *c, const char *url, int timeout_ms)
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
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_stdout);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	rc = curl_easy_perform(c);
	fflush(stdout);
	if (rc != CURLE_OK) {
		fprintf(stderr, "rdfs metrics: %s: %s\n", url,
			s.bytes > MAX_BYTES ? "more than 64 MiB: not a metrics page" :
			err[0]		    ? err :
					      curl_easy_strerror(rc));
		return TOOL_FAIL;
	}
	return TOOL_OK;
}

static int metrics_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "url", required_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	const char *urls[MAX_URLS];
	char def[512];
	int opt, n = 0, ret = TOOL_OK;
	CURL *c;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hu:", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s", tool_cmd_metrics.help);
			return TOOL_OK;
		}
		if (opt == 'u') {
			if (n == MAX_URLS)
				return tool_usage(&tool_cmd_metrics, "at most 32 --url options");
			urls[n++] = optarg;
			continue;
		}
		return tool_usage(&tool_cmd_metrics, "unknown option");
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_metrics, "unexpected argument");
	if (n == 0) {
		if (default_url(t->cfg, def, sizeof(def)))
			return tool_usage(&tool_cmd_metrics,
					  "no metrics URL: give --url, or set [rdfs] metrics_url "
					  "or [metrics] listen in the configuration");
		urls[n++] = def;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) || !(c = curl_easy_init())) {
		fprintf(stderr, "rdfs metrics: cannot initialise libcurl\n");
		return TOOL_FAIL;
	}
	for (int i = 0; i < n; i++) {
		/* a comment line the text format allows: which server the lines below are of */
		if (n > 1)
			printf("# rdfs metrics: %s\n", urls[i]);
		if (fetch(c, urls[i], t->timeout_ms) != TOOL_OK)
			ret = TOOL_FAIL;
	}
	curl_easy_cleanup(c);
	curl_global_cleanup();
	return ret;
}

const struct tool_cmd tool_cmd_metrics = {
	.name = "metrics",
	.args = "[--url URL]...",
	.summary = "print servers' Prometheus metrics",
	.run = metrics_run,
	.offline = 1,
	.help = "usage: rdfs metrics [--url URL]...\n"
		"\n"
		"Fetch the Prometheus metrics (text format 0.0.4) of rdfs servers over HTTP\n"
		"and print them, each URL's after a comment line naming it when there are\n"
		"several. A server serves them when [metrics] listen, its own metrics_listen\n"
		"or --metrics-listen gives it an address (see rdfs-metaserver --help and\n"
		"rdfs-ioserver --help; docs/DESIGN.md, \"Metrics\", lists what they count).\n"
		"Needs no key and no metaserver connection. --timeout bounds each fetch.\n"
		"\n"
		"  -u, --url URL   fetch URL (http://HOST:PORT/metrics); repeatable.\n"
		"                  Default: [rdfs] metrics_url of the configuration, else the\n"
		"                  metaserver's endpoint on this host as the configuration\n"
		"                  names it ([metaserver] metrics_listen, else [metrics]\n"
		"                  listen; a wildcard host is 127.0.0.1)\n"
		"\n"
		"Exit status: 0 when every URL answered, 1 when one did not (an HTTP error,\n"
		"a timeout, a refused connection), 2 for a usage error or no URL at all.\n",
};
