/* SPDX-License-Identifier: MIT */
/*
 * rpc_internal.h - what the client and server halves of lib/rpc share.
 *
 * Handshake, one round trip after connect:
 *   1. server -> AUTH_CHALLENGE { nonce Ns }
 *   2. client -> AUTH_RESPONSE  { HMAC(key, "rdfs-auth-client" Ns Nc claim), Nc, claim }
 *      where the claim selects the key (auth.h); the key, not the claim, decides who
 *      the peer is
 *   3. server -> AUTH_RESULT    status 0 { HMAC(key, "rdfs-auth-server" Nc Ns) }
 *      or status -EACCES with an Error body, and the server hangs up.
 * The client checks the server's proof too, so neither side talks to an impostor.
 */
#ifndef RDFS_RPC_INTERNAL_H
#define RDFS_RPC_INTERNAL_H

#include <stdint.h>

#include "rpc.h"

#define RPC_PROTOCOL_VERSION	1
#define RPC_ROLE_MAX		AUTH_ID_MAX
#define RPC_EVENT_BATCH		32
#define RPC_URL_MAX		300

int64_t rpc_mono_ms(void);
void rpc_hdr_init(struct rdfs_frame_hdr *h, uint16_t op, uint8_t flags, int status,
		  uint32_t tag, size_t body_len, size_t data_len);
/* Total of @niov iovecs into *@out; -EMSGSIZE over RDFS_MAX_DATA. */
int rpc_iov_sum(const struct iovec *iov, int niov, size_t *out);
/* Send a message whose body is @m (copied if the socket cannot take it at once). */
int rpc_send_msg(struct xport_conn *conn, uint16_t op, uint8_t flags, int status,
		 uint32_t tag, const ProtobufCMessage *m, const struct iovec *data, int niov);
/* An error reply: @status with an Error body (@message, else strerror). */
int rpc_send_error(struct xport_conn *conn, uint16_t op, uint32_t tag, int status,
		   const char *message);

#endif
