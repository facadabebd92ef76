/* SPDX-License-Identifier: MIT */
/*
 * auth.h - keys, identities and the HMAC-SHA256 challenge/response on them.
 *
 * Who a peer is comes from the key it proves, never from what it says. A peer's
 * AuthResponse names a *claim* that only selects the key its proof is checked
 * with (docs/DESIGN.md, "Trust"):
 *   "server"          the server key, HMAC(cap key, "rdfs-server-key-v1"): only
 *                     hosts holding the capability key (metaserver, I/O servers)
 *   "node:NAME:GEN"   a client node's own key, HMAC(HMAC(cap key,
 *                     "rdfs-node-key-v1"), "NAME:GEN"), made by `rdfs node add`
 *   anything else     the shared client key (the cluster secret)
 * A proof with the server key makes a server; every other proof a client.
 */
#ifndef RDFS_AUTH_H
#define RDFS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_NONCE_LEN	32
#define AUTH_MAC_LEN	32
#define AUTH_SECRET_MIN	16
#define AUTH_SECRET_MAX	1024

struct auth_secret {
	size_t len;
	uint8_t key[AUTH_SECRET_MAX];
};

/*
 * Load a secret file: its bytes, with one trailing newline stripped. Refuses
 * (-EPERM) a file readable or writable by group/other, -EINVAL if shorter than
 * AUTH_SECRET_MIN bytes, -errno from open/read.
 */
int auth_secret_load(const char *path, struct auth_secret *out);
/* Write a new random secret (64 hex characters) to @path with mode 0600. */
int auth_secret_generate(const char *path);
void auth_secret_from_bytes(struct auth_secret *out, const void *key, size_t len);

#define AUTH_ID_MAX	64	/* a claim or identity, with its NUL */
#define AUTH_NODE_NAME_MAX 40

enum auth_class {
	AUTH_CLASS_CLIENT = 1,		/* the shared client key or a node key */
	AUTH_CLASS_SERVER = 2,		/* the server key */
};

/* Who an authenticated peer is. */
struct auth_peer {
	enum auth_class cls;
	/* "server", "node:NAME:GEN", or "client" for the shared client key */
	char id[AUTH_ID_MAX];
};

/* The keys a server checks proofs with. */
struct auth_keys {
	struct auth_secret client;	/* shared client key (cluster secret); len 0: none */
	struct auth_secret server;	/* len 0: no server may connect */
	struct auth_secret node_master;	/* per-node keys derive from it; len 0: none */
};

/*
 * Fill @out from the cluster secret @client (may be NULL) and the capability
 * key @cap_key (may be NULL: then neither servers nor nodes can prove anything).
 */
void auth_keys_derive(struct auth_keys *out, const struct auth_secret *client,
		      const struct auth_secret *cap_key);
void auth_keys_clear(struct auth_keys *k);
/* The server key of @cap_key. */
void auth_server_key(const struct auth_secret *cap_key, struct auth_secret *out);
/* The key of node identity @node_id ("NAME:GEN"), from the capability key. */
void auth_node_key(const struct auth_secret *cap_key, const char *node_id,
		   struct auth_secret *out);
/*
 * The TLS 1.3 pre-shared key of @key (tls:// connections, lib/xport_tls.h):
 * HMAC(key, "rdfs-tls-psk-v1"), so the key itself never keys two protocols.
 */
void auth_tls_psk(const struct auth_secret *key, uint8_t psk[AUTH_MAC_LEN]);
/* 0 if @name may name a node: 1..AUTH_NODE_NAME_MAX of [A-Za-z0-9._-]; else -EINVAL. */
int auth_node_name_check(const char *name);
/*
 * Which key proves @claim, and who a peer proving it is. -EINVAL for a
 * malformed node claim, -EACCES when @k has no key for the claim.
 */
int auth_claim_key(const struct auth_keys *k, const char *claim, struct auth_secret *key,
		   struct auth_peer *peer);

/* What a program authenticates as: a claim and the key that proves it. */
struct auth_identity {
	char claim[AUTH_ID_MAX];
	struct auth_secret key;
};
/*
 * Load a client's key file: a node key file (`rdfs node add`; first line
 * "rdfs-node-key NAME:GEN", second line the key in hex) gives the claim
 * "node:NAME:GEN"; any other file is the shared cluster secret and gives
 * @default_claim. Errors as auth_secret_load().
 */
int auth_identity_load(const char *path, const char *default_claim, struct auth_identity *out);
/* The server identity of @cap_key. */
void auth_identity_server(const struct auth_secret *cap_key, struct auth_identity *out);
/* Write node @node_id's key file (mode 0600, never over an existing file). */
int auth_node_key_write(const char *path, const char *node_id, const struct auth_secret *key);

/* Fill @buf with cryptographically random bytes (OpenSSL RAND_bytes). */
int auth_random(void *buf, size_t len);

/* HMAC-SHA256 over the concatenation of @nparts parts. */
void auth_hmac(const struct auth_secret *s, const void *const *parts, const size_t *lens,
	       int nparts, uint8_t mac[AUTH_MAC_LEN]);
/* Constant-time comparison of two MACs: 1 if equal. */
int auth_mac_equal(const uint8_t *a, const uint8_t *b, size_t len);

/* The proofs of rdfs.proto's AuthResponse and AuthResult. */
void auth_client_proof(const struct auth_secret *s, const uint8_t server_nonce[AUTH_NONCE_LEN],
		       const uint8_t client_nonce[AUTH_NONCE_LEN], const char *role,
		       uint8_t mac[AUTH_MAC_LEN]);
void auth_server_proof(const struct auth_secret *s, const uint8_t server_nonce[AUTH_NONCE_LEN],
		       const uint8_t client_nonce[AUTH_NONCE_LEN], uint8_t mac[AUTH_MAC_LEN]);

#endif
