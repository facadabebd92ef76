// SPDX-License-Identifier: MIT
/*
 * main.c - rdfs-bench's entry point: `rdfs-bench [IOR options]` or
 * `rdfs-bench mdtest [mdtest options]`; parse, fork the tasks, watch them,
 * print the report. No MPI: tasks are processes on this host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "ior.h"

int main(int argc, char **argv)
{
	struct ior_params p;
	struct ior_shared *sh;
	char began[64], err[512];
	time_t now = time(NULL);
	pid_t *pids;
	int rc, t, failed;

	if (argc > 1 && strcmp(argv[1], "mdtest") == 0)
		return md_main(argc - 1, argv + 1);
	rc = ior_parse_args(&p, argc, argv, err, sizeof(err));
	if (rc == 1) {
		ior_usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "rdfs-bench: %s\nTry 'rdfs-bench --help'.\n", err);
		return 2;
	}
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
	failed = ior_wait_tasks(pids, p.ntasks, "rdfs-bench");
	for (t = 0; t < p.ntasks; t++)
		if (sh->task[t].first.found || sh->task[t].error[0])
			failed = 1;
	ior_report(&p, sh, began, failed);
	ior_shared_destroy(sh, &p);
	free(pids);
	return failed ? 1 : 0;
}
