// SPDX-License-Identifier: MIT
/*
 * ior_main.c - rdfs-bench's command line: parse IOR's options, fork the tasks,
 * watch them, print the report. No MPI: tasks are processes on this host.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ior.h"

static void usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    rdfs-bench - IOR-like POSIX I/O benchmark with data verification\n"
"\n"
"SYNOPSIS\n"
"    rdfs-bench [-a POSIX] [-w] [-r] [-W] [-R] [-t SIZE] [-b SIZE] [-s N] [-F] [-e] [-C]\n"
"             [-k] [-N TASKS] [-i REPS] [-o PATH] [--direct] [--drop-cache] [--json[=FILE]]\n"
"\n"
"DESCRIPTION\n"
"    Runs TASKS processes (forked on this host, no MPI) that write and read a test\n"
"    file the way IOR does, and prints IOR's result table and summary. Options have\n"
"    IOR's meaning. Each task writes a block of SIZE bytes per segment in transfers of\n"
"    -t bytes. With a shared file, transfer k of segment s of task t is at offset\n"
"    s*(TASKS*block) + t*block + k*xfer; with -F each task has its own file PATH.<t>\n"
"    (PATH.00000000, ...) and the transfer is at s*block + k*xfer.\n"
"\n"
"    The data is a pattern of (file offset, writing task): every 8-byte word is a\n"
"    hash of both, so verification catches misplaced, stale or missing blocks and\n"
"    reports the first wrong byte's file and offset.\n"
"\n"
"    Per repetition: remove the old file(s) and write (-w), check the written data\n"
"    (-W), read (-r, checked with -R), then remove the file(s) unless -k.\n"
"\n"
"OPTIONS\n"
"    -a API        I/O interface; only POSIX (default POSIX).\n"
"    -w            Write phase (default: -w and -r when neither is given).\n"
"    -r            Read phase. Without -w the file must exist (written with -k).\n"
"    -W            Check write: after the write phase read the data back (task i\n"
"                  reads task i+1's with -C) and verify it (not timed).\n"
"    -R            Check read: verify the data of the timed read phase.\n"
"    -t SIZE       Transfer size, bytes per read()/write(); a multiple of 8 (default 256k).\n"
"    -b SIZE       Block size: contiguous bytes per task per segment, a multiple of\n"
"                  the transfer size (default 1m).\n"
"    -s N          Segments (default 1).\n"
"    -F            File per process instead of one shared file.\n"
"    -e            fsync() after the writes, inside the timed write.\n"
"    -C            Reorder tasks for the read back: task i reads what task i+1 wrote,\n"
"                  so no task reads its own data.\n"
"    -k            Keep the test file(s) after the run.\n"
"    -N TASKS      Number of processes (default 1, at most %d).\n"
"    -i REPS       Repetitions (default 1).\n"
"    -o PATH       Test file (default ./testFile).\n"
"    --direct      Open with O_DIRECT (sizes must then be multiples of 4 KiB).\n"
"    --drop-cache  After the write phase and before the read phase, fdatasync and\n"
"                  posix_fadvise(POSIX_FADV_DONTNEED) the file so reads go to storage.\n"
"    --json[=FILE] Print the results as JSON instead of the table; with FILE, print\n"
"                  the table and write the JSON to FILE.\n"
"    -h, --help    This text.\n"
"\n"
"    SIZE takes a k, m, g or t suffix (powers of 1024). rdfs-bench reads no config file.\n"
"\n"
"OUTPUT\n"
"    One row per phase and repetition: bw(MiB/s) = aggregate bytes / total time;\n"
"    IOPS = transfers / wr/rd time; Latency(s) = mean time of one read()/write();\n"
"    open, wr/rd and close are each measured from the first task starting the step\n"
"    to the last task finishing it (tasks meet at a barrier between steps); total is\n"
"    from the first open to the last close. The summary gives Max/Min/Mean/StdDev\n"
"    over the repetitions.\n"
"\n"
"EXAMPLES\n"
"    rdfs-bench -w -r -W -R -t 1m -b 64m -N 4 -o /mnt/rdfs/ior.dat\n"
"    rdfs-bench -w -r -R -F -C -e --drop-cache -t 1m -b 256m -N 2 -i 3 -o /mnt/rdfs/f\n"
"    rdfs-bench -w -k -t 4k -b 1m -s 16 -o /tmp/x && rdfs-bench -r -R -t 4k -b 1m -s 16 -o /tmp/x\n"
"\n"
"EXIT STATUS\n"
"    0  every phase ran and all checked data was right\n"
"    1  verification found wrong data, or an I/O error stopped a task\n"
"    2  bad usage\n", IOR_MAX_TASKS);
}

/* "64k", "1m", "4096": bytes, with k/m/g/t as powers of 1024. */
static int ior_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (*end) {
		const char *units = "kmgt";
		const char *u = strchr(units, tolower((unsigned char)*end));

		if (!u || end[1] != '\0')
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		if (v > (~0ull >> shift))
			return -ERANGE;
		v <<= shift;
	}
	*out = v;
	return 0;
}

static int bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "rdfs-bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'rdfs-bench --help'.\n");
	return 2;
}

static int parse_count(const char *s, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static void save_cmdline(struct ior_params *p, int argc, char **argv)
{
	size_t used = 0;
	int i;

	for (i = 0; i < argc && used < sizeof(p->cmdline); i++)
		used += (size_t)snprintf(p->cmdline + used, sizeof(p->cmdline) - used, "%s%s",
					 i ? " " : "", argv[i]);
}

/* Returns 0, or an exit status (2) after printing why. */
static int parse_args(struct ior_params *p, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "direct", no_argument, NULL, 'D' },
		{ "drop-cache", no_argument, NULL, 'X' },
		{ "json", optional_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c;

	*p = (struct ior_params){
		.api = "POSIX", .path = "./testFile", .xfer = 256 << 10, .block = 1 << 20,
		.segments = 1, .ntasks = 1, .reps = 1,
	};
	save_cmdline(p, argc, argv);
	while ((c = getopt_long(argc, argv, "a:wrWRt:b:s:FeCkN:i:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (strcasecmp(optarg, "POSIX") != 0)
				return bad_usage("unsupported API '%s' (only POSIX)", optarg);
			break;
		case 'w':
			p->write = 1;
			break;
		case 'r':
			p->read = 1;
			break;
		case 'W':
			p->check_write = 1;
			break;
		case 'R':
			p->check_read = 1;
			break;
		case 'F':
			p->file_per_proc = 1;
			break;
		case 'e':
			p->fsync = 1;
			break;
		case 'C':
			p->reorder = 1;
			break;
		case 'k':
			p->keep = 1;
			break;
		case 'D':
			p->direct = 1;
			break;
		case 'X':
			p->drop_cache = 1;
			break;
		case 'J':
			p->json = 1;
			p->json_file = optarg;
			break;
		case 'o':
			p->path = optarg;
			break;
		case 't':
			if (ior_parse_size(optarg, &p->xfer) < 0 || p->xfer == 0)
				return bad_usage("bad transfer size '%s'", optarg);
			break;
		case 'b':
			if (ior_parse_size(optarg, &p->block) < 0 || p->block == 0)
				return bad_usage("bad block size '%s'", optarg);
			break;
		case 's':
			if (parse_count(optarg, 1L << 30, &v) < 0)
				return bad_usage("bad segment count '%s'", optarg);
			p->segments = (uint64_t)v;
			break;
		case 'N':
			if (parse_count(optarg, IOR_MAX_TASKS, &v) < 0)
				return bad_usage("bad number of tasks '%s'", optarg);
			p->ntasks = (int)v;
			break;
		case 'i':
			if (parse_count(optarg, 100000, &v) < 0)
				return bad_usage("bad repetition count '%s'", optarg);
			p->reps = (int)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			fprintf(stderr, "Try 'rdfs-bench --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument '%s'", argv[optind]);
	if (!p->write && !p->read)
		p->write = p->read = 1;
	if (p->xfer % 8)
		return bad_usage("transfer size must be a multiple of 8 bytes%s", "");
	if (p->block % p->xfer)
		return bad_usage("block size must be a multiple of the transfer size%s", "");
	if (p->xfer > (1ull << 30))
		return bad_usage("transfer size over 1 GiB%s", "");
	if (p->check_write && !p->write)
		return bad_usage("-W needs a write phase (-w)%s", "");
	if (p->check_read && !p->read)
		return bad_usage("-R needs a read phase (-r)%s", "");
	return 0;
}

/* Wait for every task; if one dies abnormally, stop the others (they would wait at a barrier). */
static int wait_tasks(pid_t *pids, int n)
{
	int left = n, failed = 0, status, i;
	pid_t pid;

	while (left > 0) {
		pid = waitpid(-1, &status, 0);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < n; i++)
			if (pids[i] == pid)
				break;
		if (i == n)
			continue;
		pids[i] = 0;
		left--;
		if (WIFSIGNALED(status)) {
			fprintf(stderr, "rdfs-bench: task %d killed by signal %d\n", i, WTERMSIG(status));
			failed = 1;
			for (i = 0; i < n; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGKILL);
		} else if (WEXITSTATUS(status) != 0) {
			failed = 1;
		}
	}
	return failed;
}

int main(int argc, char **argv)
{
	struct ior_params p;
	struct ior_shared *sh;
	char began[64];
	time_t now = time(NULL);
	pid_t *pids;
	int rc, t, failed;

	rc = parse_args(&p, argc, argv);
	if (rc)
		return rc;
	strftime(began, sizeof(began), "%a %b %e %H:%M:%S %Y", localtime(&now));

	sh = ior_shared_create(&p);
	pids = calloc((size_t)p.ntasks, sizeof(*pids));
	if (!sh || !pids) {
		fprintf(stderr, "rdfs-bench: cannot set up %d tasks: %s\n", p.ntasks, strerror(errno));
		return 1;
	}
	fflush(NULL);
	for (t = 0; t < p.ntasks; t++) {
		pids[t] = fork();
		if (pids[t] == 0)
			_exit(ior_task_main(&p, sh, t));
		if (pids[t] < 0) {
			fprintf(stderr, "rdfs-bench: fork: %s\n", strerror(errno));
			/* The forked ones wait at the first barrier for the missing task. */
			while (--t >= 0)
				kill(pids[t], SIGKILL);
			return 1;
		}
	}
	failed = wait_tasks(pids, p.ntasks);
	for (t = 0; t < p.ntasks; t++)
		if (sh->task[t].first.found)
			failed = 1;
	ior_report(&p, sh, began, failed);
	ior_shared_destroy(sh, &p);
	free(pids);
	return failed ? 1 : 0;
}
