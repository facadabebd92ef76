// SPDX-License-Identifier: MIT
/*
 * readahead.c - widen the kernel's read-ahead window of the mount.
 *
 * FUSE can only shrink the read-ahead the kernel offers at INIT (128 KiB by
 * default), so sequential reads arrive as 128 KiB requests, each a round trip
 * to an I/O server. The window lives in the mount's backing device info,
 * /sys/class/bdi/MAJOR:MINOR/read_ahead_kb, which root may raise once the
 * mount exists. The device number is only known by stat()ing the mount point,
 * which waits for INIT to be answered by the session loop, so a short-lived
 * thread does it once the loop runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "log.h"
#include "readahead.h"

struct readahead_job {
	char *mountpoint;
	unsigned int kib;
};

static int bdi_write(dev_t dev, unsigned int kib)
{
	char path[128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev),
		 minor(dev));
	f = fopen(path, "w");
	if (!f)
		return -errno;
	if (fprintf(f, "%u\n", kib) < 0)
		ret = -EIO;
	if (fclose(f) != 0 && ret == 0)
		ret = -errno;
	return ret;
}

static void *readahead_thread(void *arg)
{
	struct readahead_job *job = arg;
	struct stat st;
	int ret;

	if (stat(job->mountpoint, &st) < 0)
		ret = -errno;
	else
		ret = bdi_write(st.st_dev, job->kib);
	if (ret < 0)
		log_info(1300008, "cannot set read-ahead of %s to %u KiB (kernel default kept): %s",
			 job->mountpoint, job->kib, strerror(-ret));
	else
		log_info(1300009, "read-ahead of %s set to %u KiB", job->mountpoint, job->kib);
	free(job->mountpoint);
	free(job);
	return NULL;
}

int readahead_set_async(const char *mountpoint, unsigned int kib)
{
	struct readahead_job *job;
	pthread_attr_t attr;
	pthread_t tid;
	int ret;

	job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->mountpoint = strdup(mountpoint);
	job->kib = kib;
	if (!job->mountpoint) {
		free(job);
		return -ENOMEM;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&tid, &attr, readahead_thread, job);
	pthread_attr_destroy(&attr);
	if (ret) {
		free(job->mountpoint);
		free(job);
		return -ret;
	}
	return 0;
}
