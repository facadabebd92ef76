/* SPDX-License-Identifier: MIT */
/*
 * rpc_metrics.h - what every rpc server counts about its requests, for the
 * metrics registry (metrics.h): requests, errors by errno, durations and bulk
 * bytes by operation, requests in flight, connections by role.
 *
 * lib/rpc_server.c updates them (rpc_server_set_metrics()), so both servers
 * count the same way: a request counts when it is handed to the application,
 * its duration and status at its final reply (rpc_server_reply*, the parts'
 * bytes with each part), and it leaves "in flight" at rpc_request_done().
 * The families live in the registry; this struct only names them and holds
 * the label arrays and names they point into, so it must outlive the
 * registry's renders (the server keeps it for its lifetime).
 */
#ifndef RDFS_RPC_METRICS_H
#define RDFS_RPC_METRICS_H

#include <stdint.h>

#include "metrics.h"
#include "rdfs_frame.h"

enum rpc_metrics_role {
	RPC_ROLE_SERVER, /* proved the server key */
	RPC_ROLE_NODE,	 /* a client node's own key */
	RPC_ROLE_CLIENT, /* the shared cluster secret */
	RPC_ROLE_COUNT,
};

struct rpc_metrics {
	struct metric *requests;    /* counter {op} */
	struct metric *errors;	    /* counter {op, errno}, sparse */
	struct metric *duration;    /* histogram {op}, seconds */
	struct metric *bytes_in;    /* counter {op}: bulk data received with requests */
	struct metric *bytes_out;   /* counter {op}: bulk data sent in replies */
	struct metric *in_flight;   /* gauge */
	struct metric *connections; /* gauge {role} */

	const char *op_names[RDFS_OP_MAX];
	struct metrics_dim op_dim;
	struct metrics_dim role_dim;
	char names[7][64];
};

/*
 * Register the families as PREFIX_requests_total, PREFIX_request_errors_total,
 * PREFIX_request_duration_seconds, PREFIX_request_bytes_total,
 * PREFIX_reply_bytes_total, PREFIX_requests_in_flight and PREFIX_connections,
 * with a series for each opcode @served says the server handles. 0, or
 * -EINVAL (a family could not be registered: a name taken, no memory).
 */
int rpc_metrics_register(struct rpc_metrics *rm, struct metrics *r, const char *prefix,
			 int (*served)(uint16_t op));

#endif
