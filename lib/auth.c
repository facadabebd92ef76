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

/*
 * Read a private file (no group/other bits: -EPERM) into @buf, one trailing
 * newline stripped. -EINVAL when it is not AUTH_SECRET_MIN..AUTH_SECRET_MAX bytes.
 */
static int read_private(const char *path, uint8_t *buf, size_t cap, size_t *lenp)
{
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd, err = 0;

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
	while (len < cap) {
		n = read(fd, buf + len, cap - len);
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
	if (len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX)
		err = -EINVAL;
	*lenp = len;
out:
	close(fd);
	return err;
}

int auth_secret_load(const char *path, struct auth_secret *out)
{
	uint8_t buf[AUTH_SECRET_MAX + 2];
	size_t len = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = read_private(path, buf, sizeof(buf), &len);
	if (!err)
		auth_secret_from_bytes(out, buf, len);
	OPENSSL_cleanse(buf, sizeof(buf));
	return err;
}

/*
 * Write @len bytes of @text to a new file @path of mode 0600, synced; never
 * over an existing file (-EEXIST): the cluster depends on a key once made.
 * A failure leaves no file behind.
 */
static int write_private(const char *path, const char *text, size_t len)
{
	size_t off = 0;
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0)
		err = -errno;
	while (!err && off < len) {
		n = write(fd, text + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		off += (size_t)n;
	}
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (err)
		unlink(path);
	return err;
}

int auth_secret_generate(const char *path)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t raw[32];
	char text[2 * sizeof(raw) + 1];
	size_t i;
	int err;

	err = auth_random(raw, sizeof(raw));
	if (err)
		return err;
	for (i = 0; i < sizeof(raw); i++) {
		text[2 * i] = hex[raw[i] >> 4];
		text[2 * i + 1] = hex[raw[i] & 15];
	}
	text[2 * sizeof(raw)] = '\n';
	OPENSSL_cleanse(raw, sizeof(raw));
	err = write_private(path, text, sizeof(text));
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

/* ------------------------------------------------------------ keys and identities */

static const char server_key_label[] = "rdfs-server-key-v1";
static const char node_key_label[] = "rdfs-node-key-v1";
static const char tls_psk_label[] = "rdfs-tls-psk-v1";
static const char node_file_magic[] = "rdfs-node-key ";

static void derive(const struct auth_secret *key, const char *label, struct auth_secret *out)
{
	uint8_t mac[AUTH_MAC_LEN];
	const void *parts[] = { label };
	size_t lens[] = { strlen(label) };

	auth_hmac(key, parts, lens, 1, mac);
	auth_secret_from_bytes(out, mac, sizeof(mac));
	OPENSSL_cleanse(mac, sizeof(mac));
}

void auth_server_key(const struct auth_secret *cap_key, struct auth_secret *out)
{
	derive(cap_key, server_key_label, out);
}

void auth_tls_psk(const struct auth_secret *key, uint8_t psk[AUTH_MAC_LEN])
{
	const void *parts[] = { tls_psk_label };
	size_t lens[] = { strlen(tls_psk_label) };

	auth_hmac(key, parts, lens, 1, psk);
}

void auth_node_key(const struct auth_secret *cap_key, const char *node_id,
		   struct auth_secret *out)
{
	struct auth_secret master;

	derive(cap_key, node_key_label, &master);
	derive(&master, node_id, out);
	OPENSSL_cleanse(&master, sizeof(master));
}

void auth_keys_derive(struct auth_keys *out, const struct auth_secret *client,
		      const struct auth_secret *cap_key)
{
	memset(out, 0, sizeof(*out));
	if (client)
		out->client = *client;
	if (cap_key && cap_key->len) {
		auth_server_key(cap_key, &out->server);
		derive(cap_key, node_key_label, &out->node_master);
	}
}

void auth_keys_clear(struct auth_keys *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

int auth_node_name_check(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0 || n > AUTH_NODE_NAME_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

/* "NAME:GEN" with a valid NAME and a decimal GEN of 1..9 digits, no leading 0. */
static int node_id_check(const char *id)
{
	const char *colon = strrchr(id, ':');
	char name[AUTH_NODE_NAME_MAX + 1];
	size_t nl, gl;

	if (!colon)
		return -EINVAL;
	nl = (size_t)(colon - id);
	gl = strlen(colon + 1);
	if (nl == 0 || nl > AUTH_NODE_NAME_MAX || gl == 0 || gl > 9 || colon[1] == '0')
		return -EINVAL;
	for (size_t i = 1; i <= gl; i++)
		if (colon[i] < '0' || colon[i] > '9')
			return -EINVAL;
	memcpy(name, id, nl);
	name[nl] = '\0';
	return auth_node_name_check(name);
}

int auth_claim_key(const struct auth_keys *k, const char *claim, struct auth_secret *key,
		   struct auth_peer *peer)
{
	memset(peer, 0, sizeof(*peer));
	if (strcmp(claim, "server") == 0) {
		if (!k->server.len)
			return -EACCES;
		*key = k->server;
		peer->cls = AUTH_CLASS_SERVER;
		strcpy(peer->id, "server");
		return 0;
	}
	if (strncmp(claim, "node:", 5) == 0) {
		if (node_id_check(claim + 5))
			return -EINVAL;
		if (!k->node_master.len)
			return -EACCES;
		derive(&k->node_master, claim + 5, key);
		peer->cls = AUTH_CLASS_CLIENT;
		snprintf(peer->id, sizeof(peer->id), "%s", claim);
		return 0;
	}
	if (!k->client.len)
		return -EACCES;
	*key = k->client;
	peer->cls = AUTH_CLASS_CLIENT;
	strcpy(peer->id, "client");
	return 0;
}

static int hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int auth_identity_load(const char *path, const char *default_claim, struct auth_identity *out)
{
	uint8_t buf[AUTH_SECRET_MAX + 2], key[AUTH_MAC_LEN];
	size_t len = 0, ml = sizeof(node_file_magic) - 1;
	const uint8_t *nl, *hex;
	int err;

	memset(out, 0, sizeof(*out));
	err = read_private(path, buf, sizeof(buf), &len);
	if (err)
		goto out;
	if (len < ml || memcmp(buf, node_file_magic, ml) != 0) {
		snprintf(out->claim, sizeof(out->claim), "%s", default_claim);
		auth_secret_from_bytes(&out->key, buf, len);
		goto out;
	}
	/* a node key file: "rdfs-node-key NAME:GEN\n" then 64 hex digits */
	err = -EINVAL;
	nl = memchr(buf, '\n', len);
	if (!nl || (size_t)(nl - buf) - ml + 5 >= sizeof(out->claim))
		goto out;
	memcpy(out->claim, "node:", 5);
	memcpy(out->claim + 5, buf + ml, (size_t)(nl - buf) - ml);
	out->claim[5 + (nl - buf) - ml] = '\0';
	if (node_id_check(out->claim + 5))
		goto out;
	hex = nl + 1;
	if ((size_t)(buf + len - hex) != 2 * sizeof(key))
		goto out;
	for (size_t i = 0; i < sizeof(key); i++) {
		int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			goto out;
		key[i] = (uint8_t)(hi << 4 | lo);
	}
	auth_secret_from_bytes(&out->key, key, sizeof(key));
	err = 0;
out:
	if (err)
		memset(out, 0, sizeof(*out));
	OPENSSL_cleanse(buf, sizeof(buf));
	OPENSSL_cleanse(key, sizeof(key));
	return err;
}

void auth_identity_server(const struct auth_secret *cap_key, struct auth_identity *out)
{
	memset(out, 0, sizeof(*out));
	strcpy(out->claim, "server");
	auth_server_key(cap_key, &out->key);
}

int auth_node_key_write(const char *path, const char *node_id, const struct auth_secret *key)
{
	static const char digits[] = "0123456789abcdef";
	char text[AUTH_ID_MAX + sizeof(node_file_magic) + 2 * AUTH_SECRET_MAX + 4];
	size_t off;
	int err;

	if (node_id_check(node_id) || key->len != AUTH_MAC_LEN)
		return -EINVAL;
	off = (size_t)snprintf(text, sizeof(text), "%s%s\n", node_file_magic, node_id);
	for (size_t i = 0; i < key->len; i++) {
		text[off++] = digits[key->key[i] >> 4];
		text[off++] = digits[key->key[i] & 15];
	}
	text[off++] = '\n';
	err = write_private(path, text, off);
	OPENSSL_cleanse(text, sizeof(text));
	return err;
}
