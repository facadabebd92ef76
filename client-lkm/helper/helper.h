/* SPDX-License-Identifier: MIT */
/*
 * helper.h - rdfs-lkm-helper, the user-space half of the kernel client: it
 * answers the module's namespace, layout and connect requests on /dev/rdfs
 * with lib/client (client-lkm/rdfs_dev_abi.h is the ABI).
 */
#ifndef RDFS_LKM_HELPER_H
#define RDFS_LKM_HELPER_H

#include <pthread.h>
#include <stdint.h>

#include "rdfs_client.h"

#define HELPER_THREADS	8

/*
 * An open file or directory the module holds a handle to. Requests on
 * several threads may use it at once, and a RELEASE may come while they do
 * (a read-ahead run outlives its open): the last one of them closes it.
 */
struct helper_handle {
	void *p;			/* struct rdfs_file / rdfs_dir; NULL: a free slot */
	int type;			/* HANDLE_FILE or HANDLE_DIR (serve.c) */
	unsigned int refs;		/* requests using it now */
	int released;			/* RELEASE came: no new request may use it */
};

struct helper {
	struct rdfs_client *client;
	int dev_fd;
	int timeout_ms;
	pthread_mutex_t lock;		/* handles */
	struct helper_handle *handles;	/* handle >> 2, minus 1 -> its slot */
	size_t nhandles;
	pthread_t threads[HELPER_THREADS];
	int nthreads;
};

/* Start the threads that serve the module's requests: 0 or -errno. */
int helper_start(struct helper *h);
/* Wait until the file system is unmounted (read returns 0): 0 or -errno. */
int helper_join(struct helper *h);

/*
 * A TCP connection to @url ("tcp://host:port") authenticated with @secret
 * as a client: the socket fd, or -errno.
 */
int ioconn_connect(const char *url, const struct auth_secret *secret, const char *claim,
		   int timeout_ms);

#endif
