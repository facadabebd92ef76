// SPDX-License-Identifier: MIT
/*
 * ior_report.c - turn the tasks' timestamps into IOR's result table and
 * summary (or a JSON document), and say what verification found.
 *
 * Per phase, as IOR: open = last open end - first open start, wr/rd = last
 * transfer end - first transfer start, close likewise, total = last close end -
 * first open start; bw = bytes moved / total; IOPS = transfers / wr/rd;
 * latency = mean time one read/write call took.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ior.h"

#define MIB (1024.0 * 1024.0)

static const char *const phase_name[IOR_NPHASES] = { "write", "read" };

static int phase_on(const struct ior_params *p, int ph)
{
	return ph == IOR_PHASE_WRITE ? p->write : p->read;
}

struct ior_result ior_phase_result(const struct ior_params *p, struct ior_shared *sh,
				   int iter, int phase)
{
	double lo[IOR_NSTAMPS], hi[IOR_NSTAMPS], lat = 0;
	size_t slot = (size_t)iter * IOR_NPHASES + phase;
	uint64_t moved = 0;
	struct ior_result r;
	int t, i, movers = 0;

	for (t = 0; t < p->ntasks; t++) {
		double *ts = ior_stamps(p, &sh->task[t], iter, phase);
		uint64_t n = sh->task[t].moved[slot];

		for (i = 0; i < IOR_NSTAMPS; i++) {
			if (t == 0 || ts[i] < lo[i])
				lo[i] = ts[i];
			if (t == 0 || ts[i] > hi[i])
				hi[i] = ts[i];
		}
		moved += n;
		if (n) {
			lat += sh->task[t].xfer_sum[slot] / (double)n;
			movers++;
		}
	}
	r.open_s = hi[IOR_T_OPEN_END] - lo[IOR_T_OPEN_START];
	r.xfer_s = hi[IOR_T_XFER_END] - lo[IOR_T_XFER_START];
	r.close_s = hi[IOR_T_CLOSE_END] - lo[IOR_T_CLOSE_START];
	r.total_s = hi[IOR_T_CLOSE_END] - lo[IOR_T_OPEN_START];
	r.bw_mib = r.total_s > 0 ? (double)(moved * p->xfer) / MIB / r.total_s : 0;
	r.iops = r.xfer_s > 0 ? (double)moved / r.xfer_s : 0;
	r.latency = movers ? lat / movers : 0;
	return r;
}

void ior_format_row(char *buf, size_t size, const char *access, const struct ior_result *r,
		    uint64_t block, uint64_t xfer, int iter)
{
	snprintf(buf, size, "%-9s %-10.2f %-10.2f %-11.6f %-10.0f %-10.2f %-10.6f %-10.6f %-10.6f %-10.6f %d",
		 access, r->bw_mib, r->iops, r->latency, block / 1024.0, xfer / 1024.0, r->open_s,
		 r->xfer_s, r->close_s, r->total_s, iter);
}

static const char *api_name(const struct ior_params *p)
{
	return p->api == IOR_API_RDFS ? "RDFS" : "POSIX";
}

void ior_format_summary(char *buf, size_t size, const char *op, const struct ior_params *p,
			const struct ior_stats *bw, const struct ior_stats *ops, double mean_s)
{
	snprintf(buf, size, "%-9s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.5f "
		 "%6d %4d %3d %5d %6llu %10llu %10llu %10.1f %s",
		 op, bw->max, bw->min, bw->mean, bw->sd, ops->max, ops->min, ops->mean, ops->sd,
		 mean_s, p->ntasks, p->reps, p->file_per_proc, p->reorder,
		 (unsigned long long)p->segments, (unsigned long long)p->block,
		 (unsigned long long)p->xfer, ior_aggregate_bytes(p) / MIB, api_name(p));
}

static const struct ior_mismatch *first_mismatch(struct ior_shared *sh, uint64_t *count)
{
	const struct ior_mismatch *best = NULL;
	int t;

	*count = 0;
	for (t = 0; t < sh->ntasks; t++) {
		const struct ior_mismatch *m = &sh->task[t].first;

		*count += sh->task[t].mismatched_xfers;
		if (m->found && (!best || m->iter < best->iter ||
				 (m->iter == best->iter && m->offset < best->offset)))
			best = m;
	}
	return best;
}

static void human_size(uint64_t v, char *buf, size_t size)
{
	if (v >= (1ull << 30) && v % (1ull << 30) == 0)
		snprintf(buf, size, "%llu GiB", (unsigned long long)(v >> 30));
	else if (v >= (1ull << 20) && v % (1ull << 20) == 0)
		snprintf(buf, size, "%llu MiB", (unsigned long long)(v >> 20));
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, size, "%llu KiB", (unsigned long long)(v >> 10));
	else
		snprintf(buf, size, "%llu bytes", (unsigned long long)v);
}

static void cache_method(const struct ior_params *p, struct ior_shared *sh, char *buf,
			 size_t size)
{
	const char *what;

	if (p->api == IOR_API_RDFS)
		what = IOR_RDFS_CACHE_NOTE;
	else if (p->direct)
		what = "O_DIRECT (client page cache bypassed)";
	else if (p->drop_cache)
		what = sh->cache_note[0] ? sh->cache_note :
			"fdatasync + posix_fadvise(POSIX_FADV_DONTNEED) after write and before read";
	else if (!p->drop_cache_cmd)
		what = "none (reads may be served from the client page cache)";
	else
		what = "";
	snprintf(buf, size, "%s%s%s%s%s", what, *what && p->drop_cache_cmd ? "; " : "",
		 p->drop_cache_cmd ? "command between write and read: '" : "",
		 p->drop_cache_cmd ? p->drop_cache_cmd : "", p->drop_cache_cmd ? "'" : "");
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void print_text(const struct ior_params *p, struct ior_shared *sh, const char *began,
		       FILE *f)
{
	char xfer[32], block[32], agg[32], line[512], cache[512];
	double bw[IOR_NPHASES][p->reps], ops[IOR_NPHASES][p->reps], secs[IOR_NPHASES][p->reps];
	int iter, ph;

	human_size(p->xfer, xfer, sizeof(xfer));
	human_size(p->block, block, sizeof(block));
	human_size(ior_aggregate_bytes(p), agg, sizeof(agg));
	cache_method(p, sh, cache, sizeof(cache));
	fprintf(f, "rdfs-bench: IOR-like I/O benchmark (forked tasks, no MPI)\n");
	fprintf(f, "Began               : %s\n", began);
	fprintf(f, "Command line        : %s\n", p->cmdline);
	fprintf(f, "\nOptions: \n");
	fprintf(f, "api                 : %s\n", api_name(p));
	fprintf(f, "test filename       : %s%s\n", p->path, p->file_per_proc ? ".<task>" : "");
	fprintf(f, "access              : %s\n", p->file_per_proc ? "file-per-process" : "single-shared-file");
	fprintf(f, "type                : independent\n");
	fprintf(f, "segments            : %llu\n", (unsigned long long)p->segments);
	fprintf(f, "ordering in a file  : %s\n", p->random ? "random" : "sequential");
	fprintf(f, "ordering inter file : %s\n", p->reorder ? "constant task offset" : "no tasks offsets");
	if (p->reorder)
		fprintf(f, "task offset         : 1\n");
	fprintf(f, "nodes               : 1\n");
	fprintf(f, "tasks               : %d\n", p->ntasks);
	fprintf(f, "clients per node    : %d\n", p->ntasks);
	fprintf(f, "repetitions         : %d\n", p->reps);
	fprintf(f, "xfersize            : %s\n", xfer);
	fprintf(f, "blocksize           : %s\n", block);
	fprintf(f, "aggregate filesize  : %s\n", agg);
	if (p->stonewall > 0)
		fprintf(f, "stonewallingTime    : %g\n", p->stonewall);
	fprintf(f, "fsync after write   : %s\n", p->fsync_per_write ? "every write call" :
		p->fsync ? "yes" : "no");
	fprintf(f, "cache between phases: %s\n", cache);
	fprintf(f, "\nResults: \n\n");
	fprintf(f, "%-9s %-10s %-10s %-11s %-10s %-10s %-10s %-10s %-10s %-10s %s\n",
		"access", "bw(MiB/s)", "IOPS", "Latency(s)", "block(KiB)", "xfer(KiB)",
		"open(s)", "wr/rd(s)", "close(s)", "total(s)", "iter");
	fprintf(f, "%-9s %-10s %-10s %-11s %-10s %-10s %-10s %-10s %-10s %-10s %s\n",
		"------", "---------", "----", "----------", "----------", "---------",
		"--------", "--------", "--------", "--------", "----");
	for (iter = 0; iter < p->reps; iter++) {
		for (ph = 0; ph < IOR_NPHASES; ph++) {
			struct ior_result r;

			if (!phase_on(p, ph))
				continue;
			r = ior_phase_result(p, sh, iter, ph);
			bw[ph][iter] = r.bw_mib;
			ops[ph][iter] = r.iops;
			secs[ph][iter] = r.total_s;
			ior_format_row(line, sizeof(line), phase_name[ph], &r, p->block, p->xfer, iter);
			fprintf(f, "%s\n", line);
		}
	}
	for (ph = 0; ph < IOR_NPHASES; ph++) {
		struct ior_stats b;

		if (!phase_on(p, ph))
			continue;
		b = ior_stats_of(bw[ph], p->reps);
		fprintf(f, "Max %-6s %.2f MiB/sec (%.2f MB/sec)\n",
			ph == IOR_PHASE_WRITE ? "Write:" : "Read:", b.max, b.max * MIB / 1e6);
	}
	fprintf(f, "\nSummary of all tests:\n");
	fprintf(f, "%-9s %10s %10s %10s %10s %10s %10s %10s %10s %10s %6s %4s %3s %5s %6s %10s %10s %10s %s\n",
		"Operation", "Max(MiB)", "Min(MiB)", "Mean(MiB)", "StdDev", "Max(OPs)", "Min(OPs)",
		"Mean(OPs)", "StdDev", "Mean(s)", "#Tasks", "reps", "fPP", "reord", "segcnt",
		"blksiz", "xsize", "aggs(MiB)", "API");
	for (ph = 0; ph < IOR_NPHASES; ph++) {
		struct ior_stats b, o, s;

		if (!phase_on(p, ph))
			continue;
		b = ior_stats_of(bw[ph], p->reps);
		o = ior_stats_of(ops[ph], p->reps);
		s = ior_stats_of(secs[ph], p->reps);
		ior_format_summary(line, sizeof(line), phase_name[ph], p, &b, &o, s.mean);
		fprintf(f, "%s\n", line);
	}
}

static void print_json(const struct ior_params *p, struct ior_shared *sh, const char *began,
		       const struct ior_mismatch *m, uint64_t nbad, int failed, FILE *f)
{
	char cache[512];
	int iter, ph, first = 1, t;

	cache_method(p, sh, cache, sizeof(cache));
	fprintf(f, "{\n  \"program\": \"rdfs-bench\",\n  \"began\": ");
	json_string(f, began);
	fprintf(f, ",\n  \"command\": ");
	json_string(f, p->cmdline);
	fprintf(f, ",\n  \"params\": {\"api\": \"%s\", \"path\": ", api_name(p));
	json_string(f, p->path);
	fprintf(f, ", \"tasks\": %d, \"reps\": %d, \"xfer\": %llu, \"block\": %llu, \"segments\": %llu, "
		"\"file_per_proc\": %s, \"fsync\": %s, \"fsync_per_write\": %s, \"reorder\": %s, \"random\": %s, "
		"\"stonewall_s\": %g, \"direct\": %s, "
		"\"drop_cache\": %s, \"check_write\": %s, \"check_read\": %s, \"aggregate_bytes\": %llu},\n",
		p->ntasks, p->reps, (unsigned long long)p->xfer, (unsigned long long)p->block,
		(unsigned long long)p->segments, p->file_per_proc ? "true" : "false",
		p->fsync ? "true" : "false", p->fsync_per_write ? "true" : "false",
		p->reorder ? "true" : "false",
		p->random ? "true" : "false", p->stonewall,
		p->direct ? "true" : "false", p->drop_cache ? "true" : "false",
		p->check_write ? "true" : "false", p->check_read ? "true" : "false",
		(unsigned long long)ior_aggregate_bytes(p));
	fprintf(f, "  \"cache\": ");
	json_string(f, cache);
	fprintf(f, ",\n  \"results\": [");
	for (iter = 0; iter < p->reps; iter++) {
		for (ph = 0; ph < IOR_NPHASES; ph++) {
			struct ior_result r;
			uint64_t moved = 0;

			if (!phase_on(p, ph))
				continue;
			r = ior_phase_result(p, sh, iter, ph);
			for (t = 0; t < p->ntasks; t++)
				moved += sh->task[t].moved[(size_t)iter * IOR_NPHASES + ph];
			fprintf(f, "%s\n    {\"access\": \"%s\", \"iter\": %d, \"bw_mib\": %.3f, \"iops\": %.3f, "
				"\"latency_s\": %.9f, \"open_s\": %.9f, \"wrrd_s\": %.9f, \"close_s\": %.9f, "
				"\"total_s\": %.9f, \"bytes\": %llu}", first ? "" : ",", phase_name[ph], iter,
				r.bw_mib, r.iops, r.latency, r.open_s, r.xfer_s, r.close_s, r.total_s,
				(unsigned long long)(moved * p->xfer));
			first = 0;
		}
	}
	fprintf(f, "\n  ],\n  \"summary\": [");
	first = 1;
	for (ph = 0; ph < IOR_NPHASES; ph++) {
		double bw[p->reps], ops[p->reps];
		struct ior_stats b, o;

		if (!phase_on(p, ph))
			continue;
		for (iter = 0; iter < p->reps; iter++) {
			struct ior_result r = ior_phase_result(p, sh, iter, ph);

			bw[iter] = r.bw_mib;
			ops[iter] = r.iops;
		}
		b = ior_stats_of(bw, p->reps);
		o = ior_stats_of(ops, p->reps);
		fprintf(f, "%s\n    {\"operation\": \"%s\", \"bw_max\": %.3f, \"bw_min\": %.3f, \"bw_mean\": %.3f, "
			"\"bw_sd\": %.3f, \"bw_median\": %.3f, \"ops_max\": %.3f, \"ops_min\": %.3f, "
			"\"ops_mean\": %.3f, \"ops_sd\": %.3f, \"ops_median\": %.3f}",
			first ? "" : ",", phase_name[ph], b.max, b.min, b.mean, b.sd,
			ior_median(bw, p->reps), o.max, o.min, o.mean, o.sd, ior_median(ops, p->reps));
		first = 0;
	}
	fprintf(f, "\n  ],\n  \"verify\": {\"checked\": %s, \"mismatched_transfers\": %llu, \"first_mismatch\": ",
		p->check_write || p->check_read ? "true" : "false", (unsigned long long)nbad);
	if (m) {
		fprintf(f, "{\"check\": \"%s\", \"iter\": %d, \"path\": ", m->phase == IOR_PHASE_WRITE ? "write" : "read", m->iter);
		json_string(f, m->path);
		fprintf(f, ", \"offset\": %llu, \"writer\": %d, \"expected\": %u, \"actual\": %u}",
			(unsigned long long)m->offset, m->writer, m->expected, m->actual);
	} else {
		fprintf(f, "null");
	}
	fprintf(f, "},\n  \"errors\": [");
	first = 1;
	for (t = 0; t < sh->ntasks; t++) {
		if (!sh->task[t].error[0])
			continue;
		fprintf(f, "%s", first ? "" : ", ");
		json_string(f, sh->task[t].error);
		first = 0;
	}
	fprintf(f, "],\n  \"ok\": %s\n}\n", failed || m ? "false" : "true");
}

void ior_report(const struct ior_params *p, struct ior_shared *sh, const char *began, int failed)
{
	uint64_t nbad;
	const struct ior_mismatch *m = first_mismatch(sh, &nbad);
	int table = !p->json || (p->json_file && !p->quiet);
	char finished[64];
	time_t now = time(NULL);
	int t;

	for (t = 0; t < sh->ntasks; t++)
		if (sh->task[t].error[0])
			fprintf(stderr, "rdfs-bench: %s\n", sh->task[t].error);
	if (m)
		fprintf(stderr, "rdfs-bench: verification failed (%s check, iteration %d): %llu transfer(s) wrong; "
			"first mismatch in %s at offset %llu: expected 0x%02x (data of task %d), found 0x%02x\n",
			m->phase == IOR_PHASE_WRITE ? "write" : "read", m->iter, (unsigned long long)nbad,
			m->path, (unsigned long long)m->offset, m->expected, m->writer, m->actual);

	if (table)
		print_text(p, sh, began, stdout);
	if (p->json) {
		FILE *f = stdout;

		if (p->json_file) {
			f = fopen(p->json_file, "w");
			if (!f) {
				fprintf(stderr, "rdfs-bench: cannot write %s: %s\n", p->json_file, strerror(errno));
				return;
			}
		}
		print_json(p, sh, began, m, nbad, failed, f);
		if (f != stdout)
			fclose(f);
	}
	if (table) {
		if (p->check_write || p->check_read)
			printf("Verification        : %s\n", m ? "FAILED" : "passed");
		strftime(finished, sizeof(finished), "%a %b %e %H:%M:%S %Y", localtime(&now));
		printf("Finished            : %s\n", finished);
		fflush(stdout);
	}
}
