/* SPDX-License-Identifier: MIT */
/*
 * ior.h - rdfs-bench, a small IOR-like POSIX I/O benchmark: the parameters, the
 * state the forked tasks share with the parent, and the functions the parts of
 * the program offer one another.
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

#define IOR_PATH_MAX		4096
#define IOR_MAX_TASKS		1024

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

struct ior_params {
	const char *api;		/* "POSIX" */
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
	int reorder;			/* -C */
	int keep;			/* -k */
	int direct;			/* --direct */
	int drop_cache;			/* --drop-cache */
	int json;			/* --json */
	const char *json_file;		/* --json=FILE, NULL: stdout */
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
	uint64_t mismatched_xfers;	/* transfers with at least one wrong byte */
	struct ior_mismatch first;	/* the lowest-offset mismatch this task saw */
	char error[512];		/* an I/O error that stopped the task, "" if none */
};

struct ior_shared {
	pthread_barrier_t barrier;
	int ntasks;
	struct ior_task_result task[];
};

/* ior_pattern.c */
void ior_pattern_fill(void *buf, size_t len, uint64_t file_offset, int writer);
/*
 * Compare @buf with what @writer wrote at @file_offset. Returns -1 if it is
 * right, else the index of the first wrong byte (and its expected value in
 * *@expected).
 */
long ior_pattern_check(const void *buf, size_t len, uint64_t file_offset, int writer,
		       uint8_t *expected);

/* ior_layout.c */
uint64_t ior_xfer_offset(const struct ior_params *p, int task, uint64_t segment,
			 uint64_t k);
void ior_task_path(const struct ior_params *p, int task, char *buf, size_t size);
/* Task whose data @task reads back: itself, or its neighbour with -C. */
int ior_read_source(const struct ior_params *p, int task);
uint64_t ior_aggregate_bytes(const struct ior_params *p);

/* ior_task.c */
struct ior_shared *ior_shared_create(const struct ior_params *p);
void ior_shared_destroy(struct ior_shared *sh, const struct ior_params *p);
/* Body of one forked task. Returns the process exit status. */
int ior_task_main(const struct ior_params *p, struct ior_shared *sh, int task);
double *ior_stamps(const struct ior_params *p, struct ior_task_result *r, int iter,
		   int phase);

/* ior_report.c */
void ior_report(const struct ior_params *p, struct ior_shared *sh, const char *began,
		 int failed);

#endif
