/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - a registry of counters, gauges and histograms, rendered in the
 * Prometheus text exposition format 0.0.4.
 *
 * A family is a metric name with at most two label dimensions, each a fixed
 * array of label values indexed by a small integer (an opcode, an errno): the
 * hot path adds to an atomic in an array, never looks up a string. A value of
 * NULL in a dimension means "not exported": updates to that index are ignored
 * and nothing is rendered for it (an opcode the server does not serve).
 * Collectors are families whose series a callback produces at render time,
 * for what is cheaper to read on a scrape than to count (queue depths,
 * capacity, the registry of I/O servers).
 *
 * Threads and ownership: families are registered before any update or render
 * (at startup); updates are lock-free and may come from any thread; renders
 * may run concurrently with updates and with each other. A histogram's
 * buckets and _count are read one by one, so a render racing an observation
 * may count it in _sum and not yet in _count: Prometheus tolerates that.
 * Every update function does nothing when given a NULL family, so code with
 * metrics off calls them unconditionally. The registry owns its families;
 * label strings and help texts must outlive it (static strings); family names and
 * dimensions' tables of values are copied.
 */
#ifndef RDFS_METRICS_H
#define RDFS_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct metrics;
struct metric;
struct metrics_emitter;

/* One label: its name and its values by index (NULL: index not exported). */
struct metrics_dim {
	const char *label;
	const char *const *values;
	unsigned int n;
};

/* Render only the series that are not 0 (errors by errno: thousands of cells, few used). */
#define METRICS_SPARSE 1u

struct metrics *metrics_new(void);
void metrics_free(struct metrics *r);

/*
 * Register a family. @d1 and @d2 are optional (NULL) label dimensions; @d2
 * only with @d1. Return the family, or NULL for an invalid name, a duplicate
 * or no memory (the caller logs; metrics are never worth failing a server).
 */
struct metric *metrics_counter(struct metrics *r, const char *name, const char *help,
			       const struct metrics_dim *d1, const struct metrics_dim *d2,
			       unsigned int flags);
struct metric *metrics_gauge(struct metrics *r, const char *name, const char *help,
			     const struct metrics_dim *d1);
/*
 * A histogram over @nbounds ascending upper bounds (the +Inf bucket is
 * implicit), observed in integer units (nanoseconds, items); rendered with
 * bounds and _sum divided by @scale (1e9 turns nanoseconds into seconds).
 */
struct metric *metrics_histogram(struct metrics *r, const char *name, const char *help,
				 const struct metrics_dim *d1, const uint64_t *bounds,
				 unsigned int nbounds, double scale);

enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE
};
/*
 * A family whose series @fn produces at every render by calling
 * metrics_emit() once per series. @fn runs on the rendering thread (the HTTP
 * server's) and may take the locks of what it reads, briefly.
 */
typedef void (*metrics_collect_fn)(void *arg, struct metrics_emitter *e);
struct metric *metrics_collector(struct metrics *r, const char *name, const char *help,
				 enum metrics_type type, const char *const *labels,
				 unsigned int nlabels, metrics_collect_fn fn, void *arg);
/* One series of a collector: one value per label of the family, then the value. */
void metrics_emit(struct metrics_emitter *e, const char *const *label_values, double v);

/* Hot path. Indices out of range, or of a NULL label value, are ignored. */
void metrics_add(struct metric *m, unsigned int i, unsigned int j, uint64_t delta);
void metrics_gauge_add(struct metric *m, unsigned int i, int64_t delta);
void metrics_gauge_set(struct metric *m, unsigned int i, int64_t v);
void metrics_observe(struct metric *m, unsigned int i, uint64_t v);

/* Monotonic nanoseconds, for durations observed into histograms. */
uint64_t metrics_now_ns(void);

/*
 * The whole registry as Prometheus text into a malloc'ed buffer (*@out,
 * free()), *@len bytes, NUL-terminated. 0 or -ENOMEM.
 */
int metrics_render(struct metrics *r, char **out, size_t *len);

/*
 * Label values for errno numbers 0..METRICS_ERRNO_MAX-1: "ENOENT", ...;
 * numbers without a name are "E<number>". Static, built once.
 */
#define METRICS_ERRNO_MAX 134
const struct metrics_dim *metrics_errno_dim(void);

/* Histogram bounds of request durations in nanoseconds: 50 us to 10 s. */
extern const uint64_t metrics_latency_bounds_ns[];
extern const unsigned int metrics_latency_nbounds;

#endif
