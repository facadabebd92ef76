// SPDX-License-Identifier: MIT
/*
 * ior_mdtest.c - `rdfs-bench mdtest`: mdtest's metadata benchmark. Each of N
 * forked tasks creates, stats, reads and removes its files in one shared
 * directory or in a directory of its own (-u), in step through a barrier, and
 * the report is mdtest's SUMMARY rate/time tables. Files written with -w are
 * checked when read back, so a fast but wrong file system does not pass.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ior.h"

const char *const md_phase_name[MD_NPHASES] = {
	"Tree creation", "File creation", "File stat", "File read", "File removal",
	"Tree removal",
};

static const char *const md_phase_key[MD_NPHASES] = {
	"tree-create", "create", "stat", "read", "remove", "tree-remove",
};

/* Report order, as mdtest: files first, then the tree. */
static const int md_report_order[MD_NPHASES] = {
	MD_CREATE, MD_STAT, MD_READ, MD_REMOVE, MD_TREE_CREATE, MD_TREE_REMOVE,
};

struct md_task_result {
	uint64_t bad_files;		/* files whose content did not verify */
	char error[512];
};

struct md_shared {
	pthread_barrier_t barrier;
	int ntasks, reps;
	struct md_task_result *task;	/* [ntasks] */
	double *stamps;			/* [ntasks][reps][MD_NPHASES][2]: start, end */
};

void md_usage(FILE *f)
{
	fprintf(f,
"NAME\n"
"    rdfs-bench mdtest - mdtest-like metadata benchmark\n"
"\n"
"SYNOPSIS\n"
"    rdfs-bench mdtest -d DIR [-n FILES] [-N TASKS] [-i REPS] [-u] [-w BYTES] [-e BYTES]\n"
"                      [-a POSIX|RDFS] [-O FILE] [--json[=FILE]] [--config FILE]\n"
"                      [--metaserver URL] [--secret-file FILE]\n"
"\n"
"DESCRIPTION\n"
"    TASKS forked processes each create FILES files (writing BYTES into each), stat\n"
"    them, open and read them, and remove them, phase by phase with a barrier in\n"
"    between, as mdtest does. Each repetition works in DIR/mdtest.<rep> (made and\n"
"    removed: the tree phases); with -u each task has its own directory\n"
"    DIR/mdtest.<rep>/task.<t>, else all share one. A phase's rate is all tasks'\n"
"    operations divided by the time from the first task starting it to the last\n"
"    one finishing. File contents are checked on read (exit 1 on a mismatch).\n"
"    A run where any task fails prints which task and why, and no rates.\n"
"\n"
"OPTIONS\n"
"    -d DIR        Directory to work in, made if missing (its parent must exist; for\n"
"                  -a RDFS a path inside rdfs). It is left in place afterwards.\n"
"    -n FILES      Files per task (default 1000).\n"
"    -N TASKS      Processes (default 1, at most %d).\n"
"    -i REPS       Repetitions (default 1).\n"
"    -u            A unique directory per task (default: one shared directory).\n"
"    -w BYTES      Bytes written into each file at creation (default 0).\n"
"    -e BYTES      Bytes read from each file in the read phase (default: -w).\n"
"    -a API        POSIX (default) or RDFS (the client library, no FUSE).\n"
"    -O FILE, --json[=FILE]\n"
"                  JSON results to FILE (with --json alone: to stdout, no table).\n"
"    --config FILE, --metaserver URL, --secret-file FILE\n"
"                  Cluster for -a RDFS, as for rdfs-bench (see rdfs-bench --help).\n"
"    -h, --help    This text.\n"
"\n"
"    BYTES takes a k, m or g suffix (powers of 1024).\n"
"\n"
"EXAMPLES\n"
"    rdfs-bench mdtest -n 1000 -N 2 -d /mnt/rdfs/md\n"
"    rdfs-bench mdtest -n 200 -N 4 -u -w 4k -i 3 -d /tmp/md -O md.json\n"
"    rdfs-bench mdtest -a RDFS --config /tmp/lc/rdfs.conf -n 500 -d /\n"
"\n"
"EXIT STATUS\n"
"    0  every phase ran and every file read back right\n"
"    1  an operation failed or a file's content was wrong\n"
"    2  bad usage\n", IOR_MAX_TASKS);
}

int md_parse_args(struct md_params *p, int argc, char **argv, char *err, size_t errsize)
{
	enum { OPT_JSON = 256, OPT_CONFIG, OPT_MS, OPT_SECRET };
	static const struct option longopts[] = {
		{ "json", optional_argument, NULL, OPT_JSON },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "metaserver", required_argument, NULL, OPT_MS },
		{ "secret-file", required_argument, NULL, OPT_SECRET },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *ms = NULL, *secret = NULL;
	int read_set = 0, c, i;
	size_t used = 0;
	long v;

	*p = (struct md_params){ .api = IOR_API_POSIX, .files = 1000, .ntasks = 1, .reps = 1 };
	err[0] = '\0';
	for (i = 0; i < argc && used < sizeof(p->cmdline); i++)
		used += (size_t)snprintf(p->cmdline + used, sizeof(p->cmdline) - used, "%s%s",
					 i ? " " : "rdfs-bench ", argv[i]);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:n:N:i:uw:e:a:O:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			p->dir = optarg;
			break;
		case 'n':
			if (ior_parse_count(optarg, 1, 100000000, &v) < 0)
				return ior_usage_error(err, errsize, "bad number of files '%s'", optarg);
			p->files = (uint64_t)v;
			break;
		case 'N':
			if (ior_parse_count(optarg, 1, IOR_MAX_TASKS, &v) < 0)
				return ior_usage_error(err, errsize, "bad number of tasks '%s' (1-%d)", optarg,
					    IOR_MAX_TASKS);
			p->ntasks = (int)v;
			break;
		case 'i':
			if (ior_parse_count(optarg, 1, 100000, &v) < 0)
				return ior_usage_error(err, errsize, "bad repetition count '%s'", optarg);
			p->reps = (int)v;
			break;
		case 'u':
			p->unique_dir = 1;
			break;
		case 'w':
			if (ior_parse_size(optarg, &p->write_bytes) < 0 || p->write_bytes > (1u << 30))
				return ior_usage_error(err, errsize, "bad write size '%s'", optarg);
			break;
		case 'e':
			if (ior_parse_size(optarg, &p->read_bytes) < 0 || p->read_bytes > (1u << 30))
				return ior_usage_error(err, errsize, "bad read size '%s'", optarg);
			read_set = 1;
			break;
		case 'a':
			if (strcasecmp(optarg, "POSIX") == 0)
				p->api = IOR_API_POSIX;
			else if (strcasecmp(optarg, "RDFS") == 0)
				p->api = IOR_API_RDFS;
			else
				return ior_usage_error(err, errsize, "unsupported API '%s' (POSIX or RDFS)", optarg);
			break;
		case 'O':
		case OPT_JSON:
			p->json = 1;
			p->json_file = optarg;
			break;
		case OPT_CONFIG:
			config_path = optarg;
			break;
		case OPT_MS:
			ms = optarg;
			break;
		case OPT_SECRET:
			secret = optarg;
			break;
		case 'h':
			return 1;
		case ':':
			if (optopt > 0 && optopt < 256)
				return ior_usage_error(err, errsize, "option '-%c' needs a value", optopt);
			return ior_usage_error(err, errsize, "option '%s' needs a value", argv[optind - 1]);
		default:
			/* optopt names a bad short option; a bad long one is only in argv */
			if (optopt > 0 && optopt < 256)
				return ior_usage_error(err, errsize, "unknown option '-%c'", optopt);
			return ior_usage_error(err, errsize, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return ior_usage_error(err, errsize, "unexpected argument '%s'", argv[optind]);
	if (!p->dir)
		return ior_usage_error(err, errsize, "missing -d DIR");
	if (!read_set)
		p->read_bytes = p->write_bytes;
	if (p->read_bytes > p->write_bytes)
		return ior_usage_error(err, errsize, "-e %llu reads past the %llu bytes -w writes",
			    (unsigned long long)p->read_bytes, (unsigned long long)p->write_bytes);
	if (p->api == IOR_API_RDFS) {
		if (p->dir[0] != '/')
			return ior_usage_error(err, errsize, "-a RDFS needs -d with an absolute path inside rdfs");
		if (ior_load_cluster(&p->cluster, config_path, ms, secret, NULL, err, errsize) < 0)
			return -EINVAL;
	} else if (config_path || ms || secret) {
		return ior_usage_error(err, errsize, "--config/--metaserver/--secret-file are for -a RDFS");
	}
	return 0;
}

static void iter_dir(const struct md_params *p, int iter, char *buf, size_t size)
{
	const char *sep = p->dir[strlen(p->dir) - 1] == '/' ? "" : "/";

	snprintf(buf, size, "%s%smdtest.%d", p->dir, sep, iter);
}

/* The directory task @task works in during repetition @iter. */
static void md_task_dir_iter(const struct md_params *p, int iter, int task, char *buf,
			     size_t size)
{
	char base[IOR_PATH_MAX];

	iter_dir(p, iter, base, sizeof(base));
	if (p->unique_dir)
		snprintf(buf, size, "%s/task.%d", base, task);
	else
		snprintf(buf, size, "%s", base);
}

void md_task_dir(const struct md_params *p, int task, char *buf, size_t size)
{
	md_task_dir_iter(p, 0, task, buf, size);
}

static void md_file_path_iter(const struct md_params *p, int iter, int task, uint64_t i,
			      char *buf, size_t size)
{
	char dir[IOR_PATH_MAX - 64];

	md_task_dir_iter(p, iter, task, dir, sizeof(dir));
	/* Task in the name: in a shared directory the names must not collide. */
	snprintf(buf, size, "%s/file.mdtest.%d.%llu", dir, task, (unsigned long long)i);
}

void md_file_path(const struct md_params *p, int task, uint64_t i, char *buf, size_t size)
{
	md_file_path_iter(p, 0, task, i, buf, size);
}

void md_format_summary(char *buf, size_t size, const char *op, const struct ior_stats *s)
{
	snprintf(buf, size, "   %-26s:%15.3f%15.3f%15.3f%15.3f", op, s->max, s->min, s->mean, s->sd);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double *md_stamp(struct md_shared *sh, int task, int iter, int phase)
{
	return sh->stamps + (((size_t)task * sh->reps + iter) * MD_NPHASES + phase) * 2;
}

static size_t md_shared_size(const struct md_params *p)
{
	return sizeof(struct md_shared) + sizeof(struct md_task_result) * (size_t)p->ntasks +
	       sizeof(double) * 2 * MD_NPHASES * (size_t)p->reps * (size_t)p->ntasks;
}

struct md_task {
	const struct md_params *p;
	struct md_shared *sh;
	struct md_task_result *res;
	struct ior_backend *io;
	int id;
	void *buf;
};

static void md_error(struct md_task *t, const char *what, const char *path, int err)
{
	if (t->res->error[0])
		return;
	snprintf(t->res->error, sizeof(t->res->error), "task %d: %s %.300s: %s", t->id, what, path,
		 strerror(err));
}

static int md_failed(struct md_task *t)
{
	return t->res->error[0] != '\0';
}

static int md_create_file(struct md_task *t, const char *path)
{
	struct ior_file *f;
	ssize_t n = 0;
	int ret;

	ret = ior_file_open(t->io, path, 1, 0, &f);
	if (ret < 0)
		return ret;
	if (t->p->write_bytes) {
		n = ior_file_pwrite(f, t->buf, t->p->write_bytes, 0);
		if (n >= 0 && (uint64_t)n != t->p->write_bytes)
			n = -EIO;
	}
	ret = ior_file_close(f);
	return n < 0 ? (int)n : ret;
}

static int md_read_file(struct md_task *t, const char *path)
{
	struct ior_file *f;
	uint8_t expected;
	ssize_t n = 0;
	int ret;

	ret = ior_file_open(t->io, path, 0, 0, &f);
	if (ret < 0)
		return ret;
	if (t->p->read_bytes) {
		n = ior_file_pread(f, (uint8_t *)t->buf + t->p->write_bytes, t->p->read_bytes, 0);
		if (n >= 0 && ((uint64_t)n != t->p->read_bytes ||
			       ior_pattern_check((uint8_t *)t->buf + t->p->write_bytes, (size_t)n, 0,
						 t->id, &expected) >= 0))
			t->res->bad_files++;
	}
	ior_file_close(f);
	return n < 0 ? (int)n : 0;
}

static void md_phase(struct md_task *t, int iter, int phase)
{
	const struct md_params *p = t->p;
	double *ts = md_stamp(t->sh, t->id, iter, phase);
	char path[IOR_PATH_MAX];
	struct stat st;
	uint64_t i;
	int ret = 0;

	pthread_barrier_wait(&t->sh->barrier);
	ts[0] = now_s();
	if (phase == MD_TREE_CREATE) {
		if (t->id == 0) {
			iter_dir(p, iter, path, sizeof(path));
			ret = ior_path_mkdir(t->io, path, 0755);
			if (ret < 0 && !md_failed(t))
				md_error(t, "mkdir", path, -ret);
		}
		/* Task directories once the repetition's directory exists. */
		pthread_barrier_wait(&t->sh->barrier);
		if (p->unique_dir && !md_failed(t)) {
			md_task_dir_iter(p, iter, t->id, path, sizeof(path));
			ret = ior_path_mkdir(t->io, path, 0755);
			if (ret < 0)
				md_error(t, "mkdir", path, -ret);
		}
	} else if (phase == MD_TREE_REMOVE) {
		if (p->unique_dir && !md_failed(t)) {
			md_task_dir_iter(p, iter, t->id, path, sizeof(path));
			ret = ior_path_rmdir(t->io, path);
			if (ret < 0)
				md_error(t, "rmdir", path, -ret);
		}
		pthread_barrier_wait(&t->sh->barrier);
		if (t->id == 0 && !md_failed(t)) {
			iter_dir(p, iter, path, sizeof(path));
			ret = ior_path_rmdir(t->io, path);
			if (ret < 0)
				md_error(t, "rmdir", path, -ret);
		}
	} else {
		for (i = 0; i < p->files && !md_failed(t); i++) {
			md_file_path_iter(p, iter, t->id, i, path, sizeof(path));
			switch (phase) {
			case MD_CREATE:
				ret = md_create_file(t, path);
				break;
			case MD_STAT:
				ret = ior_path_stat(t->io, path, &st);
				if (ret == 0 && (uint64_t)st.st_size != p->write_bytes)
					t->res->bad_files++;
				break;
			case MD_READ:
				ret = md_read_file(t, path);
				break;
			case MD_REMOVE:
				ret = ior_path_unlink(t->io, path);
				break;
			}
			if (ret < 0)
				md_error(t, md_phase_key[phase], path, -ret);
		}
	}
	ts[1] = now_s();
}

static int md_task_main(const struct md_params *p, struct md_shared *sh, int task)
{
	struct md_task t = { .p = p, .sh = sh, .res = &sh->task[task], .id = task };
	struct ior_params ip = { .api = p->api, .cluster = p->cluster };
	char err[400];
	int iter, ph;

	t.buf = malloc(p->write_bytes + p->read_bytes + 1);
	if (!t.buf)
		snprintf(t.res->error, sizeof(t.res->error), "task %d: out of memory", task);
	else if (ior_backend_open(&ip, &t.io, err, sizeof(err)) < 0)
		snprintf(t.res->error, sizeof(t.res->error), "task %d: %s", task, err);
	if (t.buf)
		ior_pattern_fill(t.buf, p->write_bytes, 0, task);
	/*
	 * -d DIR need not exist, as with mdtest (its parent must). Before the
	 * first barrier, which the other tasks wait at: not in any phase's time.
	 */
	if (task == 0 && !md_failed(&t)) {
		int ret = ior_path_mkdir(t.io, p->dir, 0755);

		if (ret < 0 && ret != -EEXIST)
			md_error(&t, "mkdir", p->dir, -ret);
	}
	for (iter = 0; iter < p->reps; iter++)
		for (ph = 0; ph < MD_NPHASES; ph++)
			md_phase(&t, iter, ph);
	ior_backend_close(t.io);
	free(t.buf);
	return md_failed(&t) || t.res->bad_files ? 1 : 0;
}

/* All tasks' operations over the span from the first start to the last end. */
static void md_phase_numbers(const struct md_params *p, struct md_shared *sh, int iter,
			     int phase, double *rate, double *secs)
{
	double lo = 0, hi = 0, ops;
	int t;

	for (t = 0; t < p->ntasks; t++) {
		double *ts = md_stamp(sh, t, iter, phase);

		if (t == 0 || ts[0] < lo)
			lo = ts[0];
		if (t == 0 || ts[1] > hi)
			hi = ts[1];
	}
	if (phase == MD_TREE_CREATE || phase == MD_TREE_REMOVE)
		ops = 1 + (p->unique_dir ? p->ntasks : 0);
	else
		ops = (double)p->files * p->ntasks;
	*secs = hi - lo;
	*rate = *secs > 0 ? ops / *secs : 0;
}

/*
 * The report of a run. A failed run (a task's error, a wrong file) prints no
 * rates: they would time operations that did not happen. What failed is on
 * stderr, and in the JSON as "error".
 */
static void md_report(const struct md_params *p, struct md_shared *sh, const char *began,
		      int failed, uint64_t bad)
{
	const char *error = "";
	double rate[MD_NPHASES][p->reps], secs[MD_NPHASES][p->reps];
	int table = !p->json || p->json_file;
	char line[256];
	int iter, k, ph;

	for (iter = 0; iter < p->reps; iter++)
		for (ph = 0; ph < MD_NPHASES; ph++)
			md_phase_numbers(p, sh, iter, ph, &rate[ph][iter], &secs[ph][iter]);
	for (k = 0; k < p->ntasks && !error[0]; k++)
		error = sh->task[k].error;
	if (!error[0] && failed)
		error = "a task died (see above)";
	if (!error[0] && bad)
		error = "files with the wrong size or content";
	if (table) {
		printf("rdfs-bench mdtest: metadata benchmark (forked tasks, no MPI)\n");
		printf("Began               : %s\n", began);
		printf("Command line        : %s\n", p->cmdline);
		printf("Path                : %s\n", p->dir);
		printf("api                 : %s\n", p->api == IOR_API_RDFS ? "RDFS" : "POSIX");
		printf("\n%d tasks, %llu files%s\n", p->ntasks,
		       (unsigned long long)p->files * (unsigned long long)p->ntasks,
		       p->unique_dir ? ", unique directory per task" : ", one shared directory");
		for (const char *kind = "rate"; kind && !error[0];
		     kind = kind[0] == 'r' ? "time" : NULL) {
			printf("\nSUMMARY %s: (of %d iterations)\n", kind, p->reps);
			printf("   Operation                      Max            Min           Mean        Std Dev\n");
			printf("   ---------                      ---            ---           ----        -------\n");
			for (k = 0; k < MD_NPHASES; k++) {
				struct ior_stats s;

				ph = md_report_order[k];
				s = ior_stats_of(kind[0] == 'r' ? rate[ph] : secs[ph], p->reps);
				md_format_summary(line, sizeof(line), md_phase_name[ph], &s);
				printf("%s\n", line);
			}
		}
		if (bad)
			printf("Verification        : FAILED (%llu files with wrong size or content)\n",
			       (unsigned long long)bad);
		else if (p->write_bytes && !error[0])
			printf("Verification        : passed\n");
		if (error[0])
			printf("\nFAILED: %s; no rates\n", error);
		printf("-- finished --\n");
		fflush(stdout);
	}
	if (p->json) {
		FILE *f = p->json_file ? fopen(p->json_file, "w") : stdout;

		if (!f) {
			fprintf(stderr, "rdfs-bench: cannot write %s: %s\n", p->json_file, strerror(errno));
			return;
		}
		fprintf(f, "{\n  \"program\": \"rdfs-bench mdtest\",\n  \"began\": \"%s\",\n", began);
		fprintf(f, "  \"params\": {\"api\": \"%s\", \"tasks\": %d, \"files_per_task\": %llu, "
			"\"reps\": %d, \"unique_dir\": %s, \"write_bytes\": %llu, \"read_bytes\": %llu},\n",
			p->api == IOR_API_RDFS ? "RDFS" : "POSIX", p->ntasks,
			(unsigned long long)p->files, p->reps, p->unique_dir ? "true" : "false",
			(unsigned long long)p->write_bytes, (unsigned long long)p->read_bytes);
		fprintf(f, "  \"phases\": [");
		for (k = 0; k < MD_NPHASES && !error[0]; k++) {
			struct ior_stats s;

			ph = md_report_order[k];
			s = ior_stats_of(rate[ph], p->reps);
			fprintf(f, "%s\n    {\"operation\": \"%s\", \"rates\": [", k ? "," : "",
				md_phase_key[ph]);
			for (iter = 0; iter < p->reps; iter++)
				fprintf(f, "%s%.3f", iter ? ", " : "", rate[ph][iter]);
			fprintf(f, "], \"max\": %.3f, \"min\": %.3f, \"mean\": %.3f, \"sd\": %.3f, "
				"\"median\": %.3f}", s.max, s.min, s.mean, s.sd,
				ior_median(rate[ph], p->reps));
		}
		fprintf(f, "\n  ],\n  \"bad_files\": %llu,\n  \"ok\": %s", (unsigned long long)bad,
			error[0] ? "false" : "true");
		if (error[0]) {
			fprintf(f, ",\n  \"error\": \"");
			for (const char *c = error; *c; c++) {
				if (*c == '"' || *c == '\\')
					fputc('\\', f);
				fputc((unsigned char)*c < 0x20 ? '?' : *c, f);
			}
			fprintf(f, "\"");
		}
		fprintf(f, "\n}\n");
		if (f != stdout)
			fclose(f);
	}
}

int md_main(int argc, char **argv)
{
	struct md_params p;
	struct md_shared *sh;
	pthread_barrierattr_t attr;
	char began[64], err[512];
	time_t now = time(NULL);
	size_t size;
	uint64_t bad = 0;
	pid_t *pids;
	int rc, t, failed;

	rc = md_parse_args(&p, argc, argv, err, sizeof(err));
	if (rc == 1) {
		md_usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "rdfs-bench mdtest: %s\nTry 'rdfs-bench mdtest --help'.\n", err);
		return 2;
	}
	strftime(began, sizeof(began), "%a %b %e %H:%M:%S %Y", localtime(&now));
	size = md_shared_size(&p);
	sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pids = calloc((size_t)p.ntasks, sizeof(*pids));
	if (sh == MAP_FAILED || !pids) {
		fprintf(stderr, "rdfs-bench mdtest: cannot set up %d tasks: %s\n", p.ntasks,
			strerror(errno));
		return 1;
	}
	sh->ntasks = p.ntasks;
	sh->reps = p.reps;
	sh->task = (struct md_task_result *)(sh + 1);
	sh->stamps = (double *)(sh->task + p.ntasks);
	pthread_barrierattr_init(&attr);
	pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->barrier, &attr, (unsigned int)p.ntasks);
	pthread_barrierattr_destroy(&attr);
	fflush(NULL);
	for (t = 0; t < p.ntasks; t++) {
		pids[t] = fork();
		if (pids[t] == 0)
			_exit(md_task_main(&p, sh, t));
		if (pids[t] < 0) {
			fprintf(stderr, "rdfs-bench mdtest: fork: %s\n", strerror(errno));
			while (--t >= 0)
				kill(pids[t], SIGKILL);
			return 1;
		}
	}
	failed = ior_wait_tasks(pids, p.ntasks, "rdfs-bench mdtest");
	for (t = 0; t < p.ntasks; t++) {
		if (sh->task[t].error[0]) {
			fprintf(stderr, "rdfs-bench mdtest: %s\n", sh->task[t].error);
			failed = 1;
		}
		bad += sh->task[t].bad_files;
	}
	if (bad)
		fprintf(stderr, "rdfs-bench mdtest: %llu file(s) had the wrong size or content\n",
			(unsigned long long)bad);
	md_report(&p, sh, began, failed, bad);
	pthread_barrier_destroy(&sh->barrier);
	munmap(sh, size);
	free(pids);
	return failed || bad ? 1 : 0;
}
