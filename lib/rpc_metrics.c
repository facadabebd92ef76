// SPDX-License-Identifier: MIT
/*
 * rpc_metrics.c - registration of the request families every rpc server has
 * (rpc_metrics.h); the updates are in rpc_server.c, where requests pass.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "rpc_metrics.h"

static const char *const role_names[RPC_ROLE_COUNT] = {
	[RPC_ROLE_SERVER] = "server",
	[RPC_ROLE_NODE] = "node",
	[RPC_ROLE_CLIENT] = "client",
};

int rpc_metrics_register(struct rpc_metrics *rm, struct metrics *r, const char *prefix,
			 int (*served)(uint16_t op))
{
	static const char *const suffix[7] = {
		"requests_total",      "request_errors_total", "request_duration_seconds",
		"request_bytes_total", "reply_bytes_total",    "requests_in_flight",
		"connections",
	};
	unsigned int i;

	memset(rm, 0, sizeof(*rm));
	for (i = 0; i < RDFS_OP_MAX; i++)
		if (served(i) && strcmp(frame_op_name(i), "unknown"))
			rm->op_names[i] = frame_op_name(i);
	rm->op_dim = (struct metrics_dim){ "op", rm->op_names, RDFS_OP_MAX };
	rm->role_dim = (struct metrics_dim){ "role", role_names, RPC_ROLE_COUNT };
	for (i = 0; i < 7; i++)
		if (snprintf(rm->names[i], sizeof(rm->names[i]), "%s_%s", prefix, suffix[i]) >=
		    (int)sizeof(rm->names[i]))
			return -EINVAL;
	rm->requests = metrics_counter(r, rm->names[0],
				       "Requests received from authenticated peers, by operation.",
				       &rm->op_dim, NULL, 0);
	rm->errors = metrics_counter(r, rm->names[1],
				     "Requests answered with an error, by operation and errno.",
				     &rm->op_dim, metrics_errno_dim(), METRICS_SPARSE);
	rm->duration = metrics_histogram(r, rm->names[2],
					 "Time from a request's arrival to its final reply, by "
					 "operation.",
					 &rm->op_dim, metrics_latency_bounds_ns,
					 metrics_latency_nbounds, 1e9);
	rm->bytes_in = metrics_counter(r, rm->names[3],
				       "Bytes of file data received with requests, by operation.",
				       &rm->op_dim, NULL, 0);
	rm->bytes_out = metrics_counter(r, rm->names[4],
					"Bytes of file data sent in replies, by operation.",
					&rm->op_dim, NULL, 0);
	rm->in_flight = metrics_gauge(r, rm->names[5],
				      "Requests received and not yet finished (queued, running "
				      "or sending their reply).",
				      NULL);
	rm->connections = metrics_gauge(r, rm->names[6],
					"Authenticated connections open, by the role their key "
					"proves: server, node (a node key) or client (the "
					"cluster secret).",
					&rm->role_dim);
	if (!rm->requests || !rm->errors || !rm->duration || !rm->bytes_in || !rm->bytes_out ||
	    !rm->in_flight || !rm->connections)
		return -EINVAL;
	return 0;
}
