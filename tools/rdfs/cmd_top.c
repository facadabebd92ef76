// SPDX-License-Identifier: MIT
/*
 * cmd_top.c - `rdfs top`: the servers' request rates, mean latencies and bytes
 * per operation, live, from their Prometheus metrics (the same counters
 * `rdfs metrics` prints). Every interval it fetches each URL again and shows
 * the difference over the interval: what happened since, not since the start.
 * Single-threaded; a server that does not answer is shown as such and tried
 * again at the next interval.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

#define MAX_URLS 32
#define MAX_OPS	 64

/* What one server's page says about one operation. */
struct op_sample {
	char op[32];
	double requests, errors, seconds, bytes_in, bytes_out;
};

struct server {
	const char *url;
	char prefix[16]; /* "rdfs_ms", "rdfs_ios" */
	struct op_sample ops[MAX_OPS];
	int n, ok;
	double when;
};

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct op_sample *op_of(struct server *s, const char *op, size_t len)
{
	for (int i = 0; i < s->n; i++)
		if (strlen(s->ops[i].op) == len && !memcmp(s->ops[i].op, op, len))
			return &s->ops[i];
	if (s->n == MAX_OPS || len >= sizeof(s->ops[0].op))
		return NULL;
	memset(&s->ops[s->n], 0, sizeof(s->ops[0]));
	memcpy(s->ops[s->n].op, op, len);
	return &s->ops[s->n++];
}

/*
 * Read the per-op series of a page: PREFIX_requests_total{op="x"} and the
 * errors, durations and bytes beside it. Anything else is skipped, so a page
 * with more (or other) families still parses.
 */
static void parse_page(struct server *s, char *page)
{
	static const char *const fams[] = { "requests_total", "request_errors_total",
					    "request_duration_seconds_sum", "request_bytes_total",
					    "reply_bytes_total" };

	s->n = 0;
	for (char *line = strtok(page, "\n"); line; line = strtok(NULL, "\n")) {
		char *brace = strchr(line, '{'), *us, *op, *end, *val;
		struct op_sample *o;
		double v;
		size_t fam;

		if (line[0] == '#' || !brace || strncmp(line, "rdfs_", 5))
			continue;
		/* prefix: rdfs_ms or rdfs_ios (the second '_') */
		us = strchr(line + 5, '_');
		if (!us || us > brace || (size_t)(us - line) >= sizeof(s->prefix))
			continue;
		for (fam = 0; fam < sizeof(fams) / sizeof(fams[0]); fam++)
			if ((size_t)(brace - us - 1) == strlen(fams[fam]) &&
			    !strncmp(us + 1, fams[fam], strlen(fams[fam])))
				break;
		if (fam == sizeof(fams) / sizeof(fams[0]))
			continue;
		op = strstr(brace, "op=\"");
		end = op ? strchr(op + 4, '"') : NULL;
		val = strrchr(line, ' ');
		if (!end || !val)
			continue;
		v = strtod(val + 1, NULL);
		if (!isfinite(v))
			continue;
		memcpy(s->prefix, line, us - line);
		s->prefix[us - line] = '\0';
		o = op_of(s, op + 4, end - op - 4);
		if (!o)
			continue;
		switch (fam) {
		case 0:
			o->requests += v;
			break;
		case 1:
			o->errors += v;
			break; /* summed over errno */
		case 2:
			o->seconds += v;
			break;
		case 3:
			o->bytes_in += v;
			break;
		default:
			o->bytes_out += v;
			break;
		}
	}
}

static const struct op_sample *find(const struct server *s, const char *op)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->ops[i].op, op))
			return &s->ops[i];
	return NULL;
}

static void show(const struct server *prev, const struct server *cur, int nserv, int all)
{
	for (int i = 0; i < nserv; i++) {
		const struct server *p = &prev[i], *c = &cur[i];
		double dt = c->when - p->when;

		printf("%s  %s\n", c->url, c->ok ? c->prefix : "(no answer)");
		if (!c->ok || !p->ok || dt <= 0)
			continue;
		printf("  %-14s %10s %8s %12s %12s %12s\n", "op", "req/s", "err/s", "mean ms",
		       "in MiB/s", "out MiB/s");
		for (int k = 0; k < c->n; k++) {
			const struct op_sample *b = &c->ops[k], *a = find(p, b->op);
			double req, err, sec, bin, bout;

			if (!a)
				continue;
			req = b->requests - a->requests;
			err = b->errors - a->errors;
			sec = b->seconds - a->seconds;
			bin = b->bytes_in - a->bytes_in;
			bout = b->bytes_out - a->bytes_out;
			if (req <= 0 && !all)
				continue;
			printf("  %-14s %10.1f %8.1f %12.3f %12.1f %12.1f\n", b->op, req / dt,
			       err / dt, req > 0 ? sec / req * 1e3 : 0.0, bin / dt / 1048576,
			       bout / dt / 1048576);
		}
	}
	fflush(stdout);
}

static void sample(CURL *c, struct server *s, int timeout_ms)
{
	char why[CURL_ERROR_SIZE + 64], *body;
	size_t len;

	s->when = mono_s();
	s->ok = metrics_get(c, s->url, timeout_ms, &body, &len, why, sizeof(why)) == 0;
	if (!s->ok)
		return;
	parse_page(s, body);
	free(body);
}

static int top_run(struct tool *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "url", required_argument, NULL, 'u' },
		{ "interval", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'a' },
		{ NULL, 0, NULL, 0 },
	};
	static struct server prev[MAX_URLS], cur[MAX_URLS];
	double interval = 2;
	long count = -1;
	int opt, n = 0, all = 0, tty = isatty(STDOUT_FILENO);
	char def[512], *end;
	CURL *c;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "hu:d:n:a", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s", tool_cmd_top.help);
			return TOOL_OK;
		case 'u':
			if (n == MAX_URLS)
				return tool_usage(&tool_cmd_top, "at most 32 --url options");
			cur[n++].url = optarg;
			break;
		case 'd':
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.1 && interval <= 3600))
				return tool_usage(&tool_cmd_top,
						  "--interval takes seconds from 0.1 to 3600");
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1)
				return tool_usage(&tool_cmd_top, "--count takes a positive number");
			break;
		case 'a':
			all = 1;
			break;
		default:
			return tool_usage(&tool_cmd_top, "unknown option");
		}
	}
	if (optind != argc)
		return tool_usage(&tool_cmd_top, "unexpected argument");
	if (n == 0) {
		if (metrics_default_url(t->cfg, def, sizeof(def)))
			return tool_usage(&tool_cmd_top,
					  "no metrics URL: give --url, or set [rdfs] metrics_url "
					  "or [metrics] listen in the configuration");
		cur[n++].url = def;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) || !(c = curl_easy_init())) {
		fprintf(stderr, "rdfs top: cannot initialise libcurl\n");
		return TOOL_FAIL;
	}
	for (int i = 0; i < n; i++)
		sample(c, &cur[i], t->timeout_ms);
	for (long k = 0; count < 0 || k < count; k++) {
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (time_t)interval) * 1e9) };

		memcpy(prev, cur, sizeof(prev[0]) * n);
		nanosleep(&ts, NULL);
		for (int i = 0; i < n; i++)
			sample(c, &cur[i], t->timeout_ms);
		if (tty)
			printf("\033[H\033[2J");
		printf("rdfs top: every %.1f s%s\n", interval, all ? "" : " (ops with requests)");
		show(prev, cur, n, all);
		if (!tty)
			printf("\n");
	}
	curl_easy_cleanup(c);
	curl_global_cleanup();
	return TOOL_OK;
}

const struct tool_cmd tool_cmd_top = {
	.name = "top",
	.args = "[--url URL]... [--interval SEC] [--count N] [--all]",
	.summary = "servers' request rates and latencies, live",
	.run = top_run,
	.offline = 1,
	.help = "usage: rdfs top [--url URL]... [--interval SEC] [--count N] [--all]\n"
		"\n"
		"Show, for each server and operation, what the last interval brought: requests\n"
		"per second, errors per second, the mean time from a request's arrival to its\n"
		"reply, and MiB/s of file data received and sent. The figures come from the\n"
		"servers' Prometheus metrics (rdfs metrics prints them whole), fetched again\n"
		"every interval; a server that does not answer is shown as such and asked\n"
		"again next time. On a terminal the screen is redrawn; otherwise each\n"
		"interval's table follows the last (for logs and scripts).\n"
		"\n"
		"  -u, --url URL       a server's metrics (http://HOST:PORT/metrics);\n"
		"                      repeatable. Default: as rdfs metrics --help says\n"
		"  -d, --interval SEC  seconds between samples (default 2; 0.1 to 3600)\n"
		"  -n, --count N       stop after N intervals (default: until interrupted)\n"
		"  -a, --all           also show operations without requests in the interval\n"
		"\n"
		"Exit status: 0 (also when a server did not answer), 2 for a usage error.\n",
};
