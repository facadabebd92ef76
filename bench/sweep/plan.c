// SPDX-License-Identifier: MIT
/*
 * plan.c - how much one pass reads per request size, where its region of the
 * test file is, and the records a measured point becomes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "sweep.h"

uint64_t plan_requests(const struct sweep_plan *p, uint64_t size)
{
	uint64_t n = (p->bytes_per_size + size - 1) / size;

	return n < p->min_requests ? p->min_requests : n;
}

uint64_t plan_stream_requests(const struct sweep_plan *p, uint64_t size)
{
	uint64_t n = plan_requests(p, size), k = p->streams > 1 ? (uint64_t)p->streams : 1;

	return (n + k - 1) / k;
}

uint64_t plan_pass_bytes(const struct sweep_plan *p)
{
	uint64_t total = 0, k = p->streams > 1 ? (uint64_t)p->streams : 1;
	int i;

	/* a request never straddles two runs: each size may skip up to one request */
	for (i = 0; i < p->nsizes; i++)
		total += k * (plan_stream_requests(p, p->sizes[i]) + 1) * p->sizes[i];
	/* whole MiB, so every pass starts aligned for every size */
	return (total + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
}

static int size_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* "4K,64K,1M" or a range of powers of two "4K-4M". */
int plan_parse_sizes(struct sweep_plan *p, const char *list)
{
	char *copy = strdup(list), *tok, *save = NULL, *dash;
	uint64_t lo, hi, s;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	p->nsizes = 0;
	for (tok = strtok_r(copy, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		dash = strchr(tok, '-');
		if (dash)
			*dash = '\0';
		if (config_parse_size(tok, &lo) || (dash && config_parse_size(dash + 1, &hi))) {
			ret = -EINVAL;
			break;
		}
		if (!dash)
			hi = lo;
		for (s = lo; s <= hi && !ret; s *= 2) {
			if (s < SWEEP_BLOCK || s % SWEEP_BLOCK || s > (16u << 20) ||
			    p->nsizes == SWEEP_MAX_SIZES)
				ret = -EINVAL;
			else
				p->sizes[p->nsizes++] = s;
		}
	}
	free(copy);
	if (!ret && p->nsizes == 0)
		ret = -EINVAL;
	if (!ret)
		qsort(p->sizes, p->nsizes, sizeof(p->sizes[0]), size_cmp);
	return ret;
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void result_finish(struct sweep_result *r)
{
	r->mib_per_s = r->seconds > 0 ? r->bytes / r->seconds / (1024.0 * 1024.0) : 0;
}

void result_emit(const struct sweep_env *env, const struct sweep_plan *p,
		 const struct sweep_result *r, const char *extra_json)
{
	printf("%-10s %9llu %9llu %10.3f %10.1f\n", p->label,
	       (unsigned long long)r->request_bytes, (unsigned long long)r->requests,
	       r->seconds, r->mib_per_s);
	fflush(stdout);
	if (!env->json)
		return;
	fprintf(env->json,
		"{\"mode\": \"%s\", \"request_bytes\": %llu, \"mib_per_s\": %.3f, "
		"\"requests\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"depth\": %d, "
		"\"run\": %d, \"verified\": %s%s%s}\n",
		p->label, (unsigned long long)r->request_bytes, r->mib_per_s,
		(unsigned long long)r->requests, (unsigned long long)r->bytes, r->seconds,
		p->depth, p->run, p->verify ? "true" : "false",
		extra_json ? ", " : "", extra_json ? extra_json : "");
	fflush(env->json);
}
