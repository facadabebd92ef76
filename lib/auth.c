// SPDX-License-Identifier: MIT
/*
 * auth.c - the cluster secret file and the HMAC-SHA256 proofs of the handshake.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "auth.h"

static const char client_label[] = "rdfs-auth-client";
static const char server_label[] = "rdfs-auth-server";

int auth_secret_load(const char *path, struct auth_secret *out)
{
	uint8_t buf[AUTH_SECRET_MAX + 2];
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		err = -EPERM;
		goto out;
	}
	while (len < sizeof(buf)) {
		n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX) {
		err = -EINVAL;
		goto out;
	}
	auth_secret_from_bytes(out, buf, len);
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return err;
}

int auth_secret_generate(const char *path)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[32];
	char text[2 * sizeof(raw) + 1];
	size_t i, off = 0;
	ssize_t n;
	int fd, err;

	err = auth_random(raw, sizeof(raw));
	if (err)
		return err;
	for (i = 0; i < sizeof(raw); i++) {
		text[2 * i] = hex[raw[i] >> 4];
		text[2 * i + 1] = hex[raw[i] & 15];
	}
	text[2 * sizeof(raw)] = '\n';
	OPENSSL_cleanse(raw, sizeof(raw));

	/* Never overwrite a secret: the whole cluster depends on it. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	if (fchmod(fd, 0600) < 0) {
		err = -errno;
		goto out_close;
	}
	while (off < sizeof(text)) {
		n = write(fd, text + off, sizeof(text) - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out_close;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0)
		err = -errno;
out_close:
	if (close(fd) < 0 && !err)
		err = -errno;
	if (err)
		unlink(path);
out:
	OPENSSL_cleanse(text, sizeof(text));
	return err;
}

void auth_secret_from_bytes(struct auth_secret *out, const void *key, size_t len)
{
	if (len > AUTH_SECRET_MAX)
		len = AUTH_SECRET_MAX;
	memset(out, 0, sizeof(*out));
	memcpy(out->key, key, len);
	out->len = len;
}

int auth_random(void *buf, size_t len)
{
	if (len > (size_t)0x7fffffff)
		return -EINVAL;
	if (RAND_bytes(buf, (int)len) != 1)
		return -EIO;
	return 0;
}

/* The HMAC algorithm object is immutable once fetched; fetching it per call is slow. */
static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void)
{
	hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

void auth_hmac(const struct auth_secret *s, const void *const *parts, const size_t *lens,
	       int nparts, uint8_t mac[AUTH_MAC_LEN])
{
	OSSL_PARAM params[2];
	EVP_MAC_CTX *ctx = NULL;
	size_t maclen = 0;
	int i, ok = 0;

	pthread_once(&hmac_once, hmac_fetch);
	if (!hmac_alg)
		goto out;
	ctx = EVP_MAC_CTX_new(hmac_alg);
	if (!ctx)
		goto out;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (!EVP_MAC_init(ctx, s->key, s->len, params))
		goto out;
	for (i = 0; i < nparts; i++)
		if (lens[i] && !EVP_MAC_update(ctx, parts[i], lens[i]))
			goto out;
	if (!EVP_MAC_final(ctx, mac, &maclen, AUTH_MAC_LEN) || maclen != AUTH_MAC_LEN)
		goto out;
	ok = 1;
out:
	EVP_MAC_CTX_free(ctx);
	/*
	 * Only an out-of-memory OpenSSL gets here. A random MAC matches nothing,
	 * so a failure can only deny access, never grant it.
	 */
	if (!ok && RAND_bytes(mac, AUTH_MAC_LEN) != 1)
		memset(mac, 0xa5, AUTH_MAC_LEN);
}

int auth_mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

void auth_client_proof(const struct auth_secret *s, const uint8_t server_nonce[AUTH_NONCE_LEN],
		       const uint8_t client_nonce[AUTH_NONCE_LEN], const char *role,
		       uint8_t mac[AUTH_MAC_LEN])
{
	const void *parts[] = { client_label, server_nonce, client_nonce, role };
	size_t lens[] = { sizeof(client_label) - 1, AUTH_NONCE_LEN, AUTH_NONCE_LEN,
			  strlen(role) };

	auth_hmac(s, parts, lens, 4, mac);
}

void auth_server_proof(const struct auth_secret *s, const uint8_t server_nonce[AUTH_NONCE_LEN],
		       const uint8_t client_nonce[AUTH_NONCE_LEN], uint8_t mac[AUTH_MAC_LEN])
{
	const void *parts[] = { server_label, client_nonce, server_nonce };
	size_t lens[] = { sizeof(server_label) - 1, AUTH_NONCE_LEN, AUTH_NONCE_LEN };

	auth_hmac(s, parts, lens, 3, mac);
}
