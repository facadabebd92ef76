/* SPDX-License-Identifier: MIT */
/*
 * auth.h - the cluster secret and the HMAC-SHA256 challenge/response on it.
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
