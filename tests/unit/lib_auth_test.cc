// SPDX-License-Identifier: MIT
/*
 * lib_auth_test.cc - HMAC against RFC 4231, the secret file rules, and the proofs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "auth.h"
}

namespace {

std::string hex(const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	std::string s;

	for (size_t i = 0; i < n; i++) {
		s += digits[p[i] >> 4];
		s += digits[p[i] & 15];
	}
	return s;
}

std::string hmac_hex(const std::string &key, const std::string &data)
{
	struct auth_secret s;
	uint8_t mac[AUTH_MAC_LEN];
	const void *parts[] = { data.data() };
	size_t lens[] = { data.size() };

	auth_secret_from_bytes(&s, key.data(), key.size());
	auth_hmac(&s, parts, lens, 1, mac);
	return hex(mac, sizeof(mac));
}

TEST(Auth, HmacRfc4231TestCase1)
{
	EXPECT_EQ("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
		  hmac_hex(std::string(20, '\x0b'), "Hi There"));
}

TEST(Auth, HmacRfc4231TestCase2)
{
	EXPECT_EQ("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		  hmac_hex("Jefe", "what do ya want for nothing?"));
}

TEST(Auth, HmacRfc4231TestCase6KeyLongerThanBlock)
{
	EXPECT_EQ("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
		  hmac_hex(std::string(131, '\xaa'),
			   "Test Using Larger Than Block-Size Key - Hash Key First"));
}

TEST(Auth, HmacOverPartsEqualsHmacOverConcatenation)
{
	struct auth_secret s;
	uint8_t a[AUTH_MAC_LEN], b[AUTH_MAC_LEN];
	const void *parts[] = { "what do ya ", "", "want for nothing?" };
	size_t lens[] = { 11, 0, 17 };

	auth_secret_from_bytes(&s, "Jefe", 4);
	auth_hmac(&s, parts, lens, 3, a);
	const void *whole[] = { "what do ya want for nothing?" };
	size_t wlen[] = { 28 };
	auth_hmac(&s, whole, wlen, 1, b);
	EXPECT_TRUE(auth_mac_equal(a, b, sizeof(a)));
	b[31] ^= 1;
	EXPECT_FALSE(auth_mac_equal(a, b, sizeof(a)));
}

class SecretFile : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/rdfs-auth-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		dir_ = tmpl;
		path_ = dir_ + "/secret";
	}
	void TearDown() override
	{
		unlink(path_.c_str());
		rmdir(dir_.c_str());
	}
	void write_file(const std::string &content, mode_t mode)
	{
		unlink(path_.c_str());
		int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
		ASSERT_GE(fd, 0);
		ASSERT_EQ((ssize_t)content.size(), write(fd, content.data(), content.size()));
		ASSERT_EQ(0, fchmod(fd, mode));
		close(fd);
	}
	std::string dir_, path_;
};

TEST_F(SecretFile, LoadStripsOneTrailingNewline)
{
	struct auth_secret s;

	write_file("0123456789abcdef0123\n", 0600);
	ASSERT_EQ(0, auth_secret_load(path_.c_str(), &s));
	EXPECT_EQ(20u, s.len);
	EXPECT_EQ(0, memcmp(s.key, "0123456789abcdef0123", 20));
	write_file("0123456789abcdef0123\n\n", 0400);
	ASSERT_EQ(0, auth_secret_load(path_.c_str(), &s));
	EXPECT_EQ(21u, s.len);
}

TEST_F(SecretFile, RefusesGroupOrOtherAccess)
{
	struct auth_secret s;

	write_file("0123456789abcdef0123", 0640);
	EXPECT_EQ(-EPERM, auth_secret_load(path_.c_str(), &s));
	write_file("0123456789abcdef0123", 0604);
	EXPECT_EQ(-EPERM, auth_secret_load(path_.c_str(), &s));
}

TEST_F(SecretFile, RefusesShortAndOverlongSecrets)
{
	struct auth_secret s;

	write_file("short\n", 0600);
	EXPECT_EQ(-EINVAL, auth_secret_load(path_.c_str(), &s));
	write_file(std::string(AUTH_SECRET_MAX + 1, 'k'), 0600);
	EXPECT_EQ(-EINVAL, auth_secret_load(path_.c_str(), &s));
	write_file(std::string(AUTH_SECRET_MAX, 'k') + "\n", 0600);
	EXPECT_EQ(0, auth_secret_load(path_.c_str(), &s));
	EXPECT_EQ((size_t)AUTH_SECRET_MAX, s.len);
}

TEST_F(SecretFile, MissingFileIsEnoent)
{
	struct auth_secret s;

	EXPECT_EQ(-ENOENT, auth_secret_load(path_.c_str(), &s));
}

TEST_F(SecretFile, GenerateWritesPrivateHexAndNeverOverwrites)
{
	struct auth_secret s, t;
	struct stat st;

	ASSERT_EQ(0, auth_secret_generate(path_.c_str()));
	ASSERT_EQ(0, stat(path_.c_str(), &st));
	EXPECT_EQ(0600u, st.st_mode & 07777);
	ASSERT_EQ(0, auth_secret_load(path_.c_str(), &s));
	EXPECT_EQ(64u, s.len);
	for (size_t i = 0; i < s.len; i++)
		EXPECT_TRUE(isxdigit(s.key[i]));
	EXPECT_EQ(-EEXIST, auth_secret_generate(path_.c_str()));
	ASSERT_EQ(0, auth_secret_load(path_.c_str(), &t));
	EXPECT_EQ(0, memcmp(s.key, t.key, s.len));
}

TEST(Auth, ProofsBindNoncesRoleAndDirection)
{
	struct auth_secret s;
	uint8_t ns[AUTH_NONCE_LEN], nc[AUTH_NONCE_LEN];
	uint8_t c1[AUTH_MAC_LEN], c2[AUTH_MAC_LEN], sv[AUTH_MAC_LEN], c3[AUTH_MAC_LEN];

	auth_secret_from_bytes(&s, "a secret of sixteen+", 20);
	ASSERT_EQ(0, auth_random(ns, sizeof(ns)));
	ASSERT_EQ(0, auth_random(nc, sizeof(nc)));
	auth_client_proof(&s, ns, nc, "client", c1);
	auth_client_proof(&s, ns, nc, "ioserver", c2);
	auth_server_proof(&s, ns, nc, sv);
	EXPECT_FALSE(auth_mac_equal(c1, c2, AUTH_MAC_LEN));
	EXPECT_FALSE(auth_mac_equal(c1, sv, AUTH_MAC_LEN));
	auth_client_proof(&s, nc, ns, "client", c3);	/* swapped nonces */
	EXPECT_FALSE(auth_mac_equal(c1, c3, AUTH_MAC_LEN));

	/* The documented construction: HMAC(secret, label || Ns || Nc || role). */
	const void *parts[] = { "rdfs-auth-client", ns, nc, "client" };
	size_t lens[] = { 16, AUTH_NONCE_LEN, AUTH_NONCE_LEN, 6 };
	auth_hmac(&s, parts, lens, 4, c3);
	EXPECT_TRUE(auth_mac_equal(c1, c3, AUTH_MAC_LEN));
	const void *sparts[] = { "rdfs-auth-server", nc, ns };
	size_t slens[] = { 16, AUTH_NONCE_LEN, AUTH_NONCE_LEN };
	auth_hmac(&s, sparts, slens, 3, c3);
	EXPECT_TRUE(auth_mac_equal(sv, c3, AUTH_MAC_LEN));
}

TEST(Auth, RandomBytesDiffer)
{
	uint8_t a[32], b[32];

	ASSERT_EQ(0, auth_random(a, sizeof(a)));
	ASSERT_EQ(0, auth_random(b, sizeof(b)));
	EXPECT_NE(0, memcmp(a, b, sizeof(a)));
}

/* ------------------------------------------------------------ keys and identities */

const char kCapKey[] = "capability key of the servers, 32";

struct auth_secret secret_of(const char *s)
{
	struct auth_secret a;

	auth_secret_from_bytes(&a, s, strlen(s));
	return a;
}

/* The documented constructions (auth.h), so another implementation can derive them. */
TEST(AuthKeys, ServerAndNodeKeysAreTheDocumentedHmacs)
{
	struct auth_secret cap = secret_of(kCapKey), k, master;

	auth_server_key(&cap, &k);
	EXPECT_EQ(hex(k.key, k.len), hmac_hex(kCapKey, "rdfs-server-key-v1"));
	auth_node_key(&cap, "n01:3", &k);
	master = secret_of("");
	{
		uint8_t m[AUTH_MAC_LEN];
		const void *parts[] = { "rdfs-node-key-v1" };
		size_t lens[] = { 16 };

		auth_hmac(&cap, parts, lens, 1, m);
		auth_secret_from_bytes(&master, m, sizeof(m));
	}
	std::string mk(reinterpret_cast<const char *>(master.key), master.len);
	EXPECT_EQ(hex(k.key, k.len), hmac_hex(mk, "n01:3"));
}

/* The claim only picks the key; a peer is a server only by the server key. */
TEST(AuthKeys, ClaimsPickKeysAndClasses)
{
	struct auth_secret client = secret_of("the cluster secret, 32 bytes ok!");
	struct auth_secret cap = secret_of(kCapKey), key, want;
	struct auth_keys keys;
	struct auth_peer peer;

	auth_keys_derive(&keys, &client, &cap);
	ASSERT_EQ(0, auth_claim_key(&keys, "server", &key, &peer));
	auth_server_key(&cap, &want);
	EXPECT_EQ(hex(key.key, key.len), hex(want.key, want.len));
	EXPECT_EQ(AUTH_CLASS_SERVER, peer.cls);
	EXPECT_STREQ("server", peer.id);

	for (const char *claim : { "client", "tool", "ioserver", "metaserver", "Client", "x" }) {
		ASSERT_EQ(0, auth_claim_key(&keys, claim, &key, &peer)) << claim;
		EXPECT_EQ(hex(key.key, key.len), hex(client.key, client.len)) << claim;
		EXPECT_EQ(AUTH_CLASS_CLIENT, peer.cls) << claim;
		EXPECT_STREQ("client", peer.id) << claim;
	}

	ASSERT_EQ(0, auth_claim_key(&keys, "node:rack1-n07:2", &key, &peer));
	auth_node_key(&cap, "rack1-n07:2", &want);
	EXPECT_EQ(hex(key.key, key.len), hex(want.key, want.len));
	EXPECT_EQ(AUTH_CLASS_CLIENT, peer.cls);
	EXPECT_STREQ("node:rack1-n07:2", peer.id);

	for (const char *bad : { "node:", "node:n1", "node:n1:", "node:n1:0", "node:n1:01",
				 "node::1", "node:a/b:1", "node:n1:x", "node:n1:1234567890" })
		EXPECT_EQ(-EINVAL, auth_claim_key(&keys, bad, &key, &peer)) << bad;

	/* a server without the capability key: nobody proves "server" or a node */
	auth_keys_derive(&keys, &client, nullptr);
	EXPECT_EQ(-EACCES, auth_claim_key(&keys, "server", &key, &peer));
	EXPECT_EQ(-EACCES, auth_claim_key(&keys, "node:n1:1", &key, &peer));
	auth_keys_clear(&keys);
}

TEST_F(SecretFile, IdentityOfAPlainSecretKeepsTheDefaultClaim)
{
	struct auth_identity id;

	write_file("0123456789abcdef0123\n", 0600);
	ASSERT_EQ(0, auth_identity_load(path_.c_str(), "tool", &id));
	EXPECT_STREQ("tool", id.claim);
	EXPECT_EQ(std::string("0123456789abcdef0123"),
		  std::string(reinterpret_cast<const char *>(id.key.key), id.key.len));
}

TEST_F(SecretFile, NodeKeyFileRoundTripsAndRefusesDamage)
{
	struct auth_secret cap = secret_of(kCapKey), k;
	struct auth_identity id;

	auth_node_key(&cap, "n01:4", &k);
	ASSERT_EQ(0, auth_node_key_write(path_.c_str(), "n01:4", &k));
	struct stat st;
	ASSERT_EQ(0, stat(path_.c_str(), &st));
	EXPECT_EQ(0600u, st.st_mode & 0777);
	/* never over an existing key file */
	EXPECT_EQ(-EEXIST, auth_node_key_write(path_.c_str(), "n01:4", &k));
	ASSERT_EQ(0, auth_identity_load(path_.c_str(), "client", &id));
	EXPECT_STREQ("node:n01:4", id.claim);
	EXPECT_EQ(hex(k.key, k.len), hex(id.key.key, id.key.len));

	write_file("rdfs-node-key n01:4\n" + std::string(63, 'a') + "\n", 0600);
	EXPECT_EQ(-EINVAL, auth_identity_load(path_.c_str(), "client", &id));
	write_file("rdfs-node-key n01:4\n" + std::string(63, 'a') + "g\n", 0600);
	EXPECT_EQ(-EINVAL, auth_identity_load(path_.c_str(), "client", &id));
	write_file("rdfs-node-key bad/name:4\n" + std::string(64, 'a') + "\n", 0600);
	EXPECT_EQ(-EINVAL, auth_identity_load(path_.c_str(), "client", &id));
	write_file("rdfs-node-key n01:4\n" + std::string(64, 'a') + "\n", 0644);
	EXPECT_EQ(-EPERM, auth_identity_load(path_.c_str(), "client", &id));
}

} // namespace
