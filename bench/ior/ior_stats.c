// SPDX-License-Identifier: MIT
/*
 * ior_stats.c - the summary statistics IOR and mdtest print over repetitions:
 * Max, Min, Mean and the population standard deviation; and the median that
 * bench/compare reports.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ior.h"

struct ior_stats ior_stats_of(const double *v, int n)
{
	struct ior_stats s = { v[0], v[0], 0, 0 };
	int i;

	for (i = 0; i < n; i++) {
		if (v[i] > s.max)
			s.max = v[i];
		if (v[i] < s.min)
			s.min = v[i];
		s.mean += v[i];
	}
	s.mean /= n;
	for (i = 0; i < n; i++)
		s.sd += (v[i] - s.mean) * (v[i] - s.mean);
	/* IOR's and mdtest's StdDev is the population's, not the sample's. */
	s.sd = sqrt(s.sd / n);
	return s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double ior_median(const double *v, int n)
{
	double *s = malloc(sizeof(*s) * (size_t)n), m;

	if (!s)
		return v[0];
	memcpy(s, v, sizeof(*s) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}
