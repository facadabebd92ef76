/* SPDX-License-Identifier: MIT */
/*
 * ior.h - rdfs-bench, an IOR/mdtest-like I/O benchmark: the parameters, the
 * state the forked tasks share with the parent, and the functions the parts of
 * the program offer one another (and the unit tests).
 *
 * The file layout is IOR's: with a shared file, transfer k of segment s of task
 * t lives at s * (ntasks * block) + t * block + k * xfer; with a file per
 * process (-F), task t's file is "<path>.<t as %08d>" and the same transfer
 * lives at s * block + k * xfer.
 */
#ifndef RDFS_IOR_H
#define RDFS_IOR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#define IOR_PATH_MAX		4096
#define IOR_MAX_TASKS		1024
#define IOR_DEFAULT_CONFIG	"/etc/rdfs/rdfs.conf"
#define IOR_DEFAULT_METASERVER	"tcp://127.0.0.1:7000"
#define IOR_DEFAULT_SECRET	"/etc/rdfs/secret"
/* What -a RDFS does between phases: nothing, and why that is honest. */
#define IOR_RDFS_CACHE_NOTE \
	"none needed (-a RDFS: the client library keeps no data past a close; each phase opens anew)"

enum ior_phase {
	IOR_PHASE_WRITE = 0,
	IOR_PHASE_READ,
	IOR_NPHASES,
};

/* Timestamps a task takes in one timed phase, as IOR's timers. */
enum ior_stamp {
	IOR_T_OPEN_START = 0,
	IOR_T_OPEN_END,
	IOR_T_XFER_START,
	IOR_T_XFER_END,
	IOR_T_CLOSE_START,
	IOR_T_CLOSE_END,
	IOR_NSTAMPS,
};

enum ior_api {
	IOR_API_POSIX = 0,	/* system calls on a path: any mounted file system */
	IOR_API_RDFS,		/* lib/client directly, no FUSE */
};

/* Where -a RDFS finds the cluster: [rdfs-bench] or [cluster] of --config. */
struct ior_cluster {
	char metaserver[256];
	char secret_file[IOR_PATH_MAX];
	int timeout_ms;
};

struct ior_params {
	enum ior_api api;		/* -a */
	const char *path;		/* -o */
	uint64_t xfer;			/* -t */
	uint64_t block;			/* -b */
	uint64_t segments;		/* -s */
	int ntasks;			/* -N */
	int reps;			/* -i */
	int write;			/* -w */
	int read;			/* -r */
	int check_write;		/* -W */
	int check_read;			/* -R */
	int file_per_proc;		/* -F */
	int fsync;			/* -e */
	int fsync_per_write;		/* -Y */
	int reorder;			/* -C */
	int random;			/* -z */
	uint64_t seed;			/* --seed, for -z */
	double stonewall;		/* -D seconds, 0: off */
	int keep;			/* -k */
	int direct;			/* --direct */
	int drop_cache;			/* --drop-cache */
	const char *drop_cache_cmd;	/* --drop-cache-cmd */
	int json;			/* --json / -O */
	const char *json_file;		/* --json=FILE / -O FILE, NULL: stdout */
	int quiet;			/* -q: no table (with a JSON file) */
	struct ior_cluster cluster;	/* -a RDFS */
	char cmdline[1024];
};

/* The first byte that did not hold what its writer should have put there. */
struct ior_mismatch {
	int found;
	int phase;			/* IOR_PHASE_WRITE: -W check, IOR_PHASE_READ: -R check */
	int iter;
	int writer;			/* the task whose data was expected */
	uint64_t offset;		/* file offset of the first wrong byte */
	uint8_t expected;
	uint8_t actual;
	char path[IOR_PATH_MAX];
};

/* What one task reports; lives in memory shared with the parent. */
struct ior_task_result {
	double *stamps;			/* [reps][IOR_NPHASES][IOR_NSTAMPS], seconds */
	double *xfer_sum;		/* [reps][IOR_NPHASES]: time spent inside read/write calls */
	uint64_t *moved;		/* [reps][IOR_NPHASES]: transfers done (less with -D) */
	uint64_t mismatched_xfers;	/* transfers with at least one wrong byte */
	struct ior_mismatch first;	/* the lowest-offset mismatch this task saw */
	char error[512];		/* an I/O error that stopped the task, "" if none */
};

struct ior_shared {
	pthread_barrier_t barrier;
	int ntasks;
	char cache_note[256];		/* what the drop-cache step actually did */
	struct ior_task_result task[];
};

/* ------------------------------------------------------------ ior_options.c */

/* "64k", "1m", "4096": whole bytes, k/m/g/t suffixes are powers of 1024. 0 or -errno. */
int ior_parse_size(const char *s, uint64_t *out);
/* A decimal integer in [@min, @max]: 0 or -EINVAL. */
int ior_parse_count(const char *s, long min, long max, long *out);
/* Format a usage error into @err and return -EINVAL (for the option parsers). */
int ior_usage_error(char *err, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * Parse rdfs-bench's IOR command line into @p (argv[0] is the program name).
 * Returns 0, 1 when --help was asked for, or -EINVAL with the reason in @err.
 * Reads --config (for -a RDFS) as part of the parse.
 */
int ior_parse_args(struct ior_params *p, int argc, char **argv, char *err, size_t errsize);
/* Fill @c from @config_path (NULL: the default, if present) and the overrides. */
int ior_load_cluster(struct ior_cluster *c, const char *config_path, const char *metaserver,
		     const char *secret_file, const char *timeout, char *err, size_t errsize);
void ior_usage(FILE *f);

/* ------------------------------------------------------------ ior_pattern.c */
void ior_pattern_fill(void *buf, size_t len, uint64_t file_offset, int writer);
/*
 * Compare @buf with what @writer wrote at @file_offset. Returns -1 if it is
 * right, else the index of the first wrong byte (and its expected value in
 * *@expected).
 */
long ior_pattern_check(const void *buf, size_t len, uint64_t file_offset, int writer,
		       uint8_t *expected);

/* ------------------------------------------------------------ ior_layout.c */
uint64_t ior_xfer_offset(const struct ior_params *p, int task, uint64_t segment,
			 uint64_t k);
void ior_task_path(const struct ior_params *p, int task, char *buf, size_t size);
/* Task whose data @task reads back: itself, or its neighbour with -C. */
int ior_read_source(const struct ior_params *p, int task);
uint64_t ior_aggregate_bytes(const struct ior_params *p);
uint64_t ior_xfers_per_task(const struct ior_params *p);
/*
 * The order in which task @owner's transfers are done: @order[i] is a transfer
 * index (segment * block/xfer + k), 0..n-1 in order, or with -z a permutation
 * drawn from (seed, owner) so that a reader of @owner's data (-C) gets the
 * writer's order. @order holds ior_xfers_per_task() entries.
 */
void ior_xfer_order(const struct ior_params *p, int owner, uint64_t *order);
/* File offset of transfer index @idx of task @owner. */
uint64_t ior_index_offset(const struct ior_params *p, int owner, uint64_t idx);

/* ------------------------------------------------------------ ior_backend.c */

/*
 * The file interface a task uses: POSIX system calls, or rdfs's client library.
 * Each task opens its own (after fork: one rdfs client per process, as IOR's
 * one per rank).
 */
struct ior_backend;
struct ior_file;

int ior_backend_open(const struct ior_params *p, struct ior_backend **out, char *err,
		     size_t errsize);
void ior_backend_close(struct ior_backend *b);
/* @write: open for writing (creating it), else read-only. 0 or -errno. */
int ior_file_open(struct ior_backend *b, const char *path, int write, int direct,
		  struct ior_file **out);
ssize_t ior_file_pwrite(struct ior_file *f, const void *buf, size_t len, uint64_t off);
ssize_t ior_file_pread(struct ior_file *f, void *buf, size_t len, uint64_t off);
int ior_file_fsync(struct ior_file *f);
int ior_file_close(struct ior_file *f);
int ior_path_unlink(struct ior_backend *b, const char *path);
int ior_path_mkdir(struct ior_backend *b, const char *path, mode_t mode);
int ior_path_rmdir(struct ior_backend *b, const char *path);
int ior_path_stat(struct ior_backend *b, const char *path, struct stat *st);
/* Make the next read of @path come from storage; describes what it did in @note. */
int ior_drop_cache(struct ior_backend *b, const char *path, char *note, size_t size);

/* ------------------------------------------------------------ ior_task.c */
struct ior_shared *ior_shared_create(const struct ior_params *p);
void ior_shared_destroy(struct ior_shared *sh, const struct ior_params *p);
/* Body of one forked task. Returns the process exit status. */
int ior_task_main(const struct ior_params *p, struct ior_shared *sh, int task);
double *ior_stamps(const struct ior_params *p, struct ior_task_result *r, int iter,
		   int phase);
/* Wait for @n forked tasks; kills the rest if one dies. 1 if any failed. */
int ior_wait_tasks(pid_t *pids, int n, const char *prog);

/* ------------------------------------------------------------ ior_stats.c */
struct ior_stats {
	double max, min, mean, sd;
};
/* IOR's Max/Min/Mean and population StdDev of @n values (n >= 1). */
struct ior_stats ior_stats_of(const double *v, int n);
double ior_median(const double *v, int n);

/* ------------------------------------------------------------ ior_report.c */
struct ior_result {
	double bw_mib, iops, latency, open_s, xfer_s, close_s, total_s;
};
struct ior_result ior_phase_result(const struct ior_params *p, struct ior_shared *sh,
				   int iter, int phase);
/* One line of IOR's result table (no newline). */
void ior_format_row(char *buf, size_t size, const char *access, const struct ior_result *r,
		    uint64_t block, uint64_t xfer, int iter);
/* One line of IOR's "Summary of all tests" (no newline). */
void ior_format_summary(char *buf, size_t size, const char *op, const struct ior_params *p,
			const struct ior_stats *bw, const struct ior_stats *ops, double mean_s);
void ior_report(const struct ior_params *p, struct ior_shared *sh, const char *began,
		 int failed);

/* ------------------------------------------------------------ ior_mdtest.c */
enum md_phase {
	MD_TREE_CREATE = 0,
	MD_CREATE,
	MD_STAT,
	MD_READ,
	MD_REMOVE,
	MD_TREE_REMOVE,
	MD_NPHASES,
};

struct md_params {
	enum ior_api api;
	const char *dir;		/* -d */
	uint64_t files;			/* -n, per task */
	int ntasks;			/* -N */
	int reps;			/* -i */
	int unique_dir;			/* -u */
	uint64_t write_bytes;		/* -w */
	uint64_t read_bytes;		/* -e, default = -w */
	int json;
	const char *json_file;
	struct ior_cluster cluster;
	char cmdline[1024];
};

int md_parse_args(struct md_params *p, int argc, char **argv, char *err, size_t errsize);
void md_usage(FILE *f);
int md_main(int argc, char **argv);
extern const char *const md_phase_name[MD_NPHASES];
/* One line of mdtest's SUMMARY rate table (no newline). */
void md_format_summary(char *buf, size_t size, const char *op, const struct ior_stats *s);
/* Path of file @i of task @task under @p->dir (unique dir or shared). */
void md_file_path(const struct md_params *p, int task, uint64_t i, char *buf, size_t size);
void md_task_dir(const struct md_params *p, int task, char *buf, size_t size);

#endif
