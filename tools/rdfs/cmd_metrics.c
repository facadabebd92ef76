// SPDX-License-Identifier: MIT
/*
 * cmd_metrics.c - `rdfs metrics`: print the Prometheus metrics of rdfs servers,
 * fetched over HTTP with libcurl. One-shot, single-threaded; needs no key and
 * no metaserver connection (the endpoints are plain HTTP, as Prometheus
 * scrapes them).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_URLS 32

static int fetch(CURL *c, const char *url, int timeout_ms)
{
	char why[CURL_ERROR_SIZE + 64], *body;
	size_t len;

	if (metrics_get(c, url, timeout_ms, &body, &len, why, sizeof(why))) {
		fprintf(stderr, "rdfs metrics: %s: %s\n", url, why);
		return TOOL_FAIL;
	}
	fwrite(body, 1, len, stdout);
	fflush(stdout);
	free(body);
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
		if (metrics_default_url(t->cfg, def, sizeof(def)))
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
