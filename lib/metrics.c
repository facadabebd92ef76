// SPDX-License-Identifier: MIT
/*
 * metrics.c - the metrics registry and its Prometheus text rendering (see metrics.h).
 *
 * Families are a list built at startup under the registry's mutex, which a
 * render holds too, so a family is never seen half made. Values are arrays of
 * C11 atomics updated with relaxed ordering: a scrape needs each number to be
 * one that was true at some moment, not a snapshot of all of them.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"

enum family_kind {
	FAM_COUNTER,
	FAM_GAUGE,
	FAM_HISTOGRAM,
	FAM_COLLECTOR
};

struct metric {
	struct metric *next;
	enum family_kind kind;
	enum metrics_type ctype; /* FAM_COLLECTOR: how it is declared */
	char *name;		 /* a copy: the registry may outlive the caller's */
	const char *help;
	struct metrics_dim d1, d2; /* n == 0: no such dimension; values copied */
	unsigned int flags;
	unsigned int ncells;   /* d1.n * d2.n, at least 1 */
	_Atomic uint64_t *u;   /* counters; histograms: ncells * (nbounds + 1) buckets */
	_Atomic int64_t *s;    /* gauges */
	_Atomic uint64_t *sum; /* histograms: per cell */
	const uint64_t *bounds;
	unsigned int nbounds;
	double scale;
	const char *const *labels; /* collectors */
	unsigned int nlabels;
	metrics_collect_fn fn;
	void *arg;
};

struct metrics {
	pthread_mutex_t mu;
	struct metric *head, *tail;
};

const uint64_t metrics_latency_bounds_ns[] = {
	50000,	   100000,     250000,	      500000,	     1000000,	     2500000,
	5000000,   10000000,   25000000,      50000000,	     100000000,	     250000000,
	500000000, 1000000000, 2500000000ull, 5000000000ull, 10000000000ull,
};
const unsigned int metrics_latency_nbounds = sizeof(metrics_latency_bounds_ns) /
					     sizeof(metrics_latency_bounds_ns[0]);

struct metrics *metrics_new(void)
{
	struct metrics *r = calloc(1, sizeof(*r));

	if (r)
		pthread_mutex_init(&r->mu, NULL);
	return r;
}

static void family_free(struct metric *m)
{
	free(m->u);
	free(m->s);
	free(m->sum);
	free(m->name);
	free((void *)m->d1.values);
	free((void *)m->d2.values);
	free(m);
}

/*
 * Copy of @d's table of values (the strings stay the caller's: static), so a
 * table that lives in the caller's struct may go before the registry does.
 */
static int dim_copy(struct metrics_dim *to, const struct metrics_dim *d)
{
	const char **v = malloc(d->n * sizeof(*v));

	if (!v)
		return -1;
	memcpy(v, d->values, d->n * sizeof(*v));
	*to = *d;
	to->values = v;
	return 0;
}

void metrics_free(struct metrics *r)
{
	struct metric *m, *next;

	if (!r)
		return;
	for (m = r->head; m; m = next) {
		next = m->next;
		family_free(m);
	}
	pthread_mutex_destroy(&r->mu);
	free(r);
}

uint64_t metrics_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Prometheus: metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names without the colon. */
static int valid_name(const char *s, int colon)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (; *s; s++) {
		if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '_' || (colon && *s == ':'))
			continue;
		return 0;
	}
	return 1;
}

static int valid_dim(const struct metrics_dim *d)
{
	/* "le" is the histogram's own; "__" names are reserved */
	return d->n > 0 && d->values && valid_name(d->label, 0) && strcmp(d->label, "le") &&
	       strncmp(d->label, "__", 2);
}

static struct metric *family_add(struct metrics *r, enum family_kind kind, const char *name,
				 const char *help, const struct metrics_dim *d1,
				 const struct metrics_dim *d2)
{
	struct metric *m;

	if (!r || !valid_name(name, 1) || !help || (d2 && !d1) || (d1 && !valid_dim(d1)) ||
	    (d2 && (!valid_dim(d2) || !strcmp(d1->label, d2->label))))
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->kind = kind;
	m->name = strdup(name);
	m->help = help;
	if (!m->name || (d1 && dim_copy(&m->d1, d1)) || (d2 && dim_copy(&m->d2, d2))) {
		family_free(m);
		return NULL;
	}
	m->ncells = (d1 ? d1->n : 1) * (d2 ? d2->n : 1);
	return m;
}

/*
 * Publish @m (allocated in full) at the end of the list, where families
 * render in order; a name taken already frees it and returns NULL.
 */
static struct metric *family_link(struct metrics *r, struct metric *m)
{
	struct metric *o;

	pthread_mutex_lock(&r->mu);
	for (o = r->head; o; o = o->next) {
		if (!strcmp(o->name, m->name)) {
			pthread_mutex_unlock(&r->mu);
			family_free(m);
			return NULL;
		}
	}
	if (r->tail)
		r->tail->next = m;
	else
		r->head = m;
	r->tail = m;
	pthread_mutex_unlock(&r->mu);
	return m;
}

struct metric *metrics_counter(struct metrics *r, const char *name, const char *help,
			       const struct metrics_dim *d1, const struct metrics_dim *d2,
			       unsigned int flags)
{
	struct metric *m = family_add(r, FAM_COUNTER, name, help, d1, d2);

	if (!m)
		return NULL;
	m->flags = flags;
	m->u = calloc(m->ncells, sizeof(*m->u));
	if (!m->u) {
		family_free(m);
		return NULL;
	}
	return family_link(r, m);
}

struct metric *metrics_gauge(struct metrics *r, const char *name, const char *help,
			     const struct metrics_dim *d1)
{
	struct metric *m = family_add(r, FAM_GAUGE, name, help, d1, NULL);

	if (!m)
		return NULL;
	m->s = calloc(m->ncells, sizeof(*m->s));
	if (!m->s) {
		family_free(m);
		return NULL;
	}
	return family_link(r, m);
}

struct metric *metrics_histogram(struct metrics *r, const char *name, const char *help,
				 const struct metrics_dim *d1, const uint64_t *bounds,
				 unsigned int nbounds, double scale)
{
	struct metric *m;
	unsigned int i;

	if (!bounds || nbounds == 0 || !(scale > 0))
		return NULL;
	for (i = 1; i < nbounds; i++)
		if (bounds[i] <= bounds[i - 1])
			return NULL;
	m = family_add(r, FAM_HISTOGRAM, name, help, d1, NULL);
	if (!m)
		return NULL;
	m->bounds = bounds;
	m->nbounds = nbounds;
	m->scale = scale;
	m->u = calloc((size_t)m->ncells * (nbounds + 1), sizeof(*m->u));
	m->sum = calloc(m->ncells, sizeof(*m->sum));
	if (!m->u || !m->sum) {
		family_free(m);
		return NULL;
	}
	return family_link(r, m);
}

struct metric *metrics_collector(struct metrics *r, const char *name, const char *help,
				 enum metrics_type type, const char *const *labels,
				 unsigned int nlabels, metrics_collect_fn fn, void *arg)
{
	struct metric *m;
	unsigned int i;

	if (!fn || (nlabels && !labels))
		return NULL;
	for (i = 0; i < nlabels; i++)
		if (!valid_name(labels[i], 0) || !strncmp(labels[i], "__", 2))
			return NULL;
	m = family_add(r, FAM_COLLECTOR, name, help, NULL, NULL);
	if (!m)
		return NULL;
	m->ctype = type;
	m->labels = labels;
	m->nlabels = nlabels;
	m->fn = fn;
	m->arg = arg;
	return family_link(r, m);
}

/* The cell of (@i, @j), or -1 when it is out of range or not exported. */
static long cell(const struct metric *m, unsigned int i, unsigned int j)
{
	if (m->d1.n) {
		if (i >= m->d1.n || !m->d1.values[i])
			return -1;
	} else if (i) {
		return -1;
	}
	if (m->d2.n) {
		if (j >= m->d2.n || !m->d2.values[j])
			return -1;
		return (long)i * m->d2.n + j;
	}
	return j ? -1 : (long)i;
}

void metrics_add(struct metric *m, unsigned int i, unsigned int j, uint64_t delta)
{
	long c;

	if (!m || m->kind != FAM_COUNTER || (c = cell(m, i, j)) < 0)
		return;
	atomic_fetch_add_explicit(&m->u[c], delta, memory_order_relaxed);
}

void metrics_gauge_add(struct metric *m, unsigned int i, int64_t delta)
{
	long c;

	if (!m || m->kind != FAM_GAUGE || (c = cell(m, i, 0)) < 0)
		return;
	atomic_fetch_add_explicit(&m->s[c], delta, memory_order_relaxed);
}

void metrics_gauge_set(struct metric *m, unsigned int i, int64_t v)
{
	long c;

	if (!m || m->kind != FAM_GAUGE || (c = cell(m, i, 0)) < 0)
		return;
	atomic_store_explicit(&m->s[c], v, memory_order_relaxed);
}

void metrics_observe(struct metric *m, unsigned int i, uint64_t v)
{
	unsigned int lo = 0, hi;
	long c;

	if (!m || m->kind != FAM_HISTOGRAM || (c = cell(m, i, 0)) < 0)
		return;
	/* the first bound >= v; nbounds when none is (the +Inf bucket) */
	hi = m->nbounds;
	while (lo < hi) {
		unsigned int mid = (lo + hi) / 2;

		if (m->bounds[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	atomic_fetch_add_explicit(&m->u[(size_t)c * (m->nbounds + 1) + lo], 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&m->sum[c], v, memory_order_relaxed);
}

/* ---------------------------------------------------------------- rendering */

struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void buf_reserve(struct buf *b, size_t more)
{
	size_t ncap;
	char *np;

	if (b->oom || b->len + more + 1 <= b->cap)
		return;
	ncap = b->cap ? b->cap : 4096;
	while (ncap < b->len + more + 1)
		ncap *= 2;
	np = realloc(b->p, ncap);
	if (!np) {
		b->oom = 1;
		return;
	}
	b->p = np;
	b->cap = ncap;
}

static void buf_put(struct buf *b, const char *s, size_t n)
{
	buf_reserve(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	buf_reserve(b, 64);
	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		buf_reserve(b, (size_t)n);
		if (b->oom)
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/*
 * The format's escapes: in HELP text a backslash and a newline; in a label
 * value also the double quote. Anything else goes as it is (UTF-8).
 */
static void buf_escaped(struct buf *b, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_put(b, "\\\\", 2);
		else if (*s == '\n')
			buf_put(b, "\\n", 2);
		else if (quote && *s == '"')
			buf_put(b, "\\\"", 2);
		else
			buf_put(b, s, 1);
	}
}

static void buf_double(struct buf *b, double v)
{
	if (isnan(v))
		buf_str(b, "NaN");
	else if (isinf(v))
		buf_str(b, v > 0 ? "+Inf" : "-Inf");
	else
		buf_printf(b, "%.15g", v);
}

static void render_header(struct buf *b, const struct metric *m, const char *type)
{
	buf_str(b, "# HELP ");
	buf_str(b, m->name);
	buf_put(b, " ", 1);
	buf_escaped(b, m->help, 0);
	buf_str(b, "\n# TYPE ");
	buf_str(b, m->name);
	buf_put(b, " ", 1);
	buf_str(b, type);
	buf_put(b, "\n", 1);
}

/* name{d1="..",d2="..",extra} with the braces left out when there is no label. */
static void render_series(struct buf *b, const struct metric *m, const char *suffix, unsigned int i,
			  unsigned int j, const char *extra)
{
	int any = 0;

	buf_str(b, m->name);
	buf_str(b, suffix);
	if (m->d1.n) {
		buf_put(b, "{", 1);
		buf_str(b, m->d1.label);
		buf_str(b, "=\"");
		buf_escaped(b, m->d1.values[i], 1);
		buf_put(b, "\"", 1);
		any = 1;
	}
	if (m->d2.n) {
		buf_put(b, ",", 1);
		buf_str(b, m->d2.label);
		buf_str(b, "=\"");
		buf_escaped(b, m->d2.values[j], 1);
		buf_put(b, "\"", 1);
	}
	if (extra) {
		buf_put(b, any ? "," : "{", 1);
		buf_str(b, extra);
		any = 1;
	}
	if (any)
		buf_put(b, "}", 1);
	buf_put(b, " ", 1);
}

static void render_cells(struct buf *b, const struct metric *m)
{
	unsigned int n1 = m->d1.n ? m->d1.n : 1, n2 = m->d2.n ? m->d2.n : 1, i, j;

	for (i = 0; i < n1; i++) {
		for (j = 0; j < n2; j++) {
			long c = cell(m, i, j);

			if (c < 0)
				continue;
			if (m->kind == FAM_COUNTER) {
				uint64_t v = atomic_load_explicit(&m->u[c], memory_order_relaxed);

				if (!v && (m->flags & METRICS_SPARSE))
					continue;
				render_series(b, m, "", i, j, NULL);
				buf_printf(b, "%llu\n", (unsigned long long)v);
			} else {
				render_series(b, m, "", i, j, NULL);
				buf_printf(b, "%lld\n",
					   (long long)atomic_load_explicit(&m->s[c],
									   memory_order_relaxed));
			}
		}
	}
}

static void render_histogram(struct buf *b, const struct metric *m)
{
	unsigned int n1 = m->d1.n ? m->d1.n : 1, i, k;
	char le[64];

	for (i = 0; i < n1; i++) {
		long c = cell(m, i, 0);
		uint64_t cum = 0;

		if (c < 0)
			continue;
		for (k = 0; k <= m->nbounds; k++) {
			cum += atomic_load_explicit(&m->u[(size_t)c * (m->nbounds + 1) + k],
						    memory_order_relaxed);
			if (k < m->nbounds)
				snprintf(le, sizeof(le), "le=\"%.15g\"",
					 (double)m->bounds[k] / m->scale);
			else
				snprintf(le, sizeof(le), "le=\"+Inf\"");
			render_series(b, m, "_bucket", i, 0, le);
			buf_printf(b, "%llu\n", (unsigned long long)cum);
		}
		render_series(b, m, "_sum", i, 0, NULL);
		buf_double(b, (double)atomic_load_explicit(&m->sum[c], memory_order_relaxed) /
				      m->scale);
		buf_put(b, "\n", 1);
		/* from the buckets, so that _count always equals the +Inf bucket */
		render_series(b, m, "_count", i, 0, NULL);
		buf_printf(b, "%llu\n", (unsigned long long)cum);
	}
}

struct metrics_emitter {
	struct buf *b;
	const struct metric *m;
};

void metrics_emit(struct metrics_emitter *e, const char *const *label_values, double v)
{
	const struct metric *m = e->m;
	unsigned int i;

	buf_str(e->b, m->name);
	for (i = 0; i < m->nlabels; i++) {
		buf_put(e->b, i ? "," : "{", 1);
		buf_str(e->b, m->labels[i]);
		buf_str(e->b, "=\"");
		buf_escaped(e->b, label_values && label_values[i] ? label_values[i] : "", 1);
		buf_put(e->b, "\"", 1);
	}
	if (m->nlabels)
		buf_put(e->b, "}", 1);
	buf_put(e->b, " ", 1);
	buf_double(e->b, v);
	buf_put(e->b, "\n", 1);
}

int metrics_render(struct metrics *r, char **out, size_t *len)
{
	struct buf b = { 0 };
	struct metric *m;

	buf_reserve(&b, 0);
	pthread_mutex_lock(&r->mu);
	for (m = r->head; m; m = m->next) {
		switch (m->kind) {
		case FAM_COUNTER:
			render_header(&b, m, "counter");
			render_cells(&b, m);
			break;
		case FAM_GAUGE:
			render_header(&b, m, "gauge");
			render_cells(&b, m);
			break;
		case FAM_HISTOGRAM:
			render_header(&b, m, "histogram");
			render_histogram(&b, m);
			break;
		case FAM_COLLECTOR: {
			struct metrics_emitter e = { &b, m };

			render_header(&b, m, m->ctype == METRICS_COUNTER ? "counter" : "gauge");
			m->fn(m->arg, &e);
			break;
		}
		}
	}
	pthread_mutex_unlock(&r->mu);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---------------------------------------------------------------- errno labels */

static const char *errno_values[METRICS_ERRNO_MAX];
static char errno_unnamed[METRICS_ERRNO_MAX][8];
static struct metrics_dim errno_dim = { "errno", errno_values, METRICS_ERRNO_MAX };
static pthread_once_t errno_once = PTHREAD_ONCE_INIT;

static void errno_init(void)
{
	/* errno 0 is success: never an error series */
	for (int e = 1; e < METRICS_ERRNO_MAX; e++) {
		const char *s = strerrorname_np(e);

		if (!s) {
			snprintf(errno_unnamed[e], sizeof(errno_unnamed[e]), "E%d", e);
			s = errno_unnamed[e];
		}
		errno_values[e] = s;
	}
}

const struct metrics_dim *metrics_errno_dim(void)
{
	pthread_once(&errno_once, errno_init);
	return &errno_dim;
}
