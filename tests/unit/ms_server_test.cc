// SPDX-License-Identifier: MIT
/*
 * ms_server_test.cc - the metaserver over real loopback sockets: requests
 * through the worker pool, bad bodies and missing creds, capabilities that
 * check with the I/O servers' cap_check, REGISTER roles, and what a closed
 * connection releases (open handles, the I/O server's up state).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <thread>

#include "ms_fixture.h"

extern "C" {
#include "cap.h"
#include "rdfs.pb-c.h"
#include "rpc.h"
#include "../../metaserver/server.h"
}

class MsServerTest : public MsTest {
protected:
	struct auth_secret secret, cap_key;
	struct ms_server *srv = nullptr;
	std::thread loop;
	std::string url;
	int root_squash = 0;

	void SetUp() override
	{
		MsTest::SetUp();
		const char *urls[] = { "tcp://127.0.0.1:0", nullptr };
		struct ms_server_opts o = {};

		auth_secret_from_bytes(&secret, "cluster secret for the ms tests", 31);
		auth_secret_from_bytes(&cap_key, "capability key for the ms tests", 31);
		o.listen = urls;
		o.secret = &secret;
		o.cap_key = &cap_key;
		o.threads = 4;
		o.root_squash = root_squash;
		ASSERT_EQ(ms_server_create(ms, &o, &srv), 0);
		url = ms_server_listen_url(srv, 0);
		loop = std::thread([this]() { ms_server_run(srv); });
	}

	void TearDown() override
	{
		ms_server_stop(srv);
		loop.join();
		ms_server_destroy(srv);
		MsTest::TearDown();
	}

	struct rpc_client *connect(const char *role)
	{
		struct rpc_client *c = nullptr;

		struct auth_secret key = secret;

		/* only the server key (derived from the capability key) proves "server" */
		if (strcmp(role, "server") == 0)
			auth_server_key(&cap_key, &key);
		EXPECT_EQ(rpc_client_connect(url.c_str(), &key, role, 5000, &c), 0);
		return c;
	}

	static Rdfs__Cred *cred(Rdfs__Cred *c, uint32_t uid)
	{
		rdfs__cred__init(c);
		c->uid = uid;
		c->gid = uid;
		return c;
	}

	/* Retry @fn until it returns true (the server acts on a close asynchronously). */
	template <typename F> static bool eventually(F fn)
	{
		for (int i = 0; i < 500; i++) {
			if (fn())
				return true;
			usleep(10000);
		}
		return false;
	}
};

TEST_F(MsServerTest, MknodLookupOverTheWire)
{
	struct rpc_client *c = connect("client");
	Rdfs__Cred cr;
	Rdfs__MknodReq mk = RDFS__MKNOD_REQ__INIT;
	Rdfs__EntryReply *er = nullptr;

	mk.cred = cred(&cr, 0);
	mk.parent = 1;
	mk.name = (char *)"hello";
	mk.mode = S_IFREG | 0644;
	mk.exclusive = 1;
	ASSERT_EQ(rpc_call(c, RDFS_OP_MKNOD, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), 0);
	ASSERT_NE(er->attr, nullptr);
	uint64_t ino = er->attr->ino;
	protobuf_c_message_free_unpacked(&er->base, nullptr);
	EXPECT_EQ(rpc_call(c, RDFS_OP_MKNOD, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), -EEXIST);

	Rdfs__LookupReq lk = RDFS__LOOKUP_REQ__INIT;
	lk.cred = &cr;
	lk.parent = 1;
	lk.name = (char *)"hello";
	ASSERT_EQ(rpc_call(c, RDFS_OP_LOOKUP, &lk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), 0);
	EXPECT_EQ(er->attr->ino, ino);
	protobuf_c_message_free_unpacked(&er->base, nullptr);

	Rdfs__ReaddirReq rd = RDFS__READDIR_REQ__INIT;
	Rdfs__ReaddirReply *rr = nullptr;
	rd.cred = &cr;
	rd.ino = 1;
	ASSERT_EQ(rpc_call(c, RDFS_OP_READDIR, &rd.base, &rdfs__readdir_reply__descriptor,
			   (ProtobufCMessage **)&rr, 5000), 0);
	ASSERT_EQ(rr->n_entries, 1u);
	EXPECT_EQ(std::string((char *)rr->entries[0]->name.data, rr->entries[0]->name.len), "hello");
	EXPECT_TRUE(rr->eof);
	protobuf_c_message_free_unpacked(&rr->base, nullptr);
	rpc_client_close(c);
}

TEST_F(MsServerTest, BadBodiesAndMissingCred)
{
	struct rpc_client *c = connect("client");
	Rdfs__ReadlinkReply junk = RDFS__READLINK_REPLY__INIT;
	Rdfs__EntryReply *er = nullptr;

	/* field 1 of LookupReq is the Cred message: these bytes are not one */
	junk.target = (char *)"\xff\xff\xff\xff\xff";
	for (int op : { RDFS_OP_LOOKUP, RDFS_OP_MKNOD, RDFS_OP_LAYOUT, RDFS_OP_COMMIT,
			RDFS_OP_READDIR, RDFS_OP_SETXATTR, RDFS_OP_RENAME }) {
		EXPECT_EQ(rpc_call(c, op, &junk.base, &rdfs__entry_reply__descriptor,
				   (ProtobufCMessage **)&er, 5000), -EBADMSG) << op;
	}
	Rdfs__LookupReq lk = RDFS__LOOKUP_REQ__INIT;
	lk.parent = 1;
	lk.name = (char *)"x";
	EXPECT_EQ(rpc_call(c, RDFS_OP_LOOKUP, &lk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), -EINVAL);
	/* an empty body: every field default, so no cred */
	EXPECT_EQ(rpc_call(c, RDFS_OP_MKDIR, nullptr, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), -EINVAL);
	/* I/O-server operations are not ours */
	EXPECT_EQ(rpc_call(c, RDFS_OP_READ, nullptr, nullptr, nullptr, 5000), -ENOSYS);
	/* still serving */
	Rdfs__Cred cr;
	lk.cred = cred(&cr, 0);
	EXPECT_EQ(rpc_call(c, RDFS_OP_LOOKUP, &lk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), -ENOENT);
	rpc_client_close(c);
}

TEST_F(MsServerTest, RegisterLayoutAndCapabilities)
{
	struct rpc_client *cl = connect("client"), *fake = connect("ioserver");
	struct rpc_client *io = connect("server");
	Rdfs__RegisterReq reg = RDFS__REGISTER_REQ__INIT;
	Rdfs__RegisterReply *rr = nullptr;

	reg.url = (char *)"tcp://127.0.0.1:7100";
	reg.volume_uuid.data = (uint8_t *)"0123456789abcdef";
	reg.volume_uuid.len = 16;
	reg.capacity_blocks = 100000;
	reg.name = (char *)"vol0";
	reg.pristine = 1;	/* no I/O server listens there to zero blocks */
	EXPECT_EQ(rpc_call(cl, RDFS_OP_REGISTER, &reg.base, &rdfs__register_reply__descriptor,
			   (ProtobufCMessage **)&rr, 5000), -EPERM);
	/* claiming to be an I/O server with the cluster secret proves nothing */
	EXPECT_EQ(rpc_call(fake, RDFS_OP_REGISTER, &reg.base, &rdfs__register_reply__descriptor,
			   (ProtobufCMessage **)&rr, 5000), -EPERM);
	rpc_client_close(fake);
	ASSERT_EQ(rpc_call(io, RDFS_OP_REGISTER, &reg.base, &rdfs__register_reply__descriptor,
			   (ProtobufCMessage **)&rr, 5000), 0);
	uint32_t sid = rr->server_id;
	protobuf_c_message_free_unpacked(&rr->base, nullptr);
	/* a second registration of the live server's volume is refused */
	{
		struct rpc_client *io2 = connect("server");

		reg.url = (char *)"tcp://127.0.0.1:7999";
		EXPECT_EQ(rpc_call(io2, RDFS_OP_REGISTER, &reg.base,
				   &rdfs__register_reply__descriptor, (ProtobufCMessage **)&rr,
				   5000), -EBUSY);
		reg.url = (char *)"tcp://127.0.0.1:7100";
		rpc_client_close(io2);
	}

	Rdfs__Cred cr;
	Rdfs__MknodReq mk = RDFS__MKNOD_REQ__INIT;
	Rdfs__EntryReply *er = nullptr;
	mk.cred = cred(&cr, 0);
	mk.parent = 1;
	mk.name = (char *)"f";
	mk.open = 1;
	mk.open_flags = O_RDWR;
	ASSERT_EQ(rpc_call(cl, RDFS_OP_MKNOD, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), 0);
	uint64_t ino = er->attr->ino, handle = er->handle;
	EXPECT_NE(handle, 0u);
	protobuf_c_message_free_unpacked(&er->base, nullptr);

	Rdfs__LayoutReq lr = RDFS__LAYOUT_REQ__INIT;
	Rdfs__LayoutReply *ly = nullptr;
	lr.cred = &cr;
	lr.ino = ino;
	lr.length = 3 * 1024 * 1024;
	lr.allocate = 1;
	lr.handle = handle;
	ASSERT_EQ(rpc_call(cl, RDFS_OP_LAYOUT, &lr.base, &rdfs__layout_reply__descriptor,
			   (ProtobufCMessage **)&ly, 5000), 0);
	ASSERT_GE(ly->n_extents, 1u);
	ASSERT_EQ(ly->n_caps, 1u);
	ASSERT_EQ(ly->n_servers, 1u);
	EXPECT_STREQ(ly->servers[0]->url, "tcp://127.0.0.1:7100");
	EXPECT_EQ(ly->chunk_size, MS_DEFAULT_CHUNK);
	Rdfs__Capability *cap = ly->caps[0];
	int64_t now = cap_now_ns();
	for (size_t i = 0; i < ly->n_extents; i++) {
		Rdfs__Extent *e = ly->extents[i];

		EXPECT_TRUE(e->unwritten);
		EXPECT_EQ(cap_check(&cap_key, cap, sid, "client", RDFS_CAP_READ | RDFS_CAP_WRITE, e->block,
				    e->length / 4096, now), 0);
	}
	/* the capability covers nothing else, and not for another server */
	uint64_t past = ly->extents[ly->n_extents - 1]->block +
			ly->extents[ly->n_extents - 1]->length / 4096;
	EXPECT_EQ(cap_check(&cap_key, cap, sid, "client", RDFS_CAP_READ, past, 1, now), -EACCES);
	/* granted to this client's identity only */
	EXPECT_STREQ(cap->holder, "client");
	EXPECT_EQ(cap_check(&cap_key, cap, sid, "server", RDFS_CAP_READ, ly->extents[0]->block, 1,
			    now), -EACCES);
	EXPECT_EQ(cap_check(&cap_key, cap, sid + 1, "client", RDFS_CAP_READ, ly->extents[0]->block, 1, now),
		  -EACCES);
	EXPECT_EQ(cap_check(&cap_key, cap, sid, "client", RDFS_CAP_READ, ly->extents[0]->block, 1,
			    now + 601ll * 1000000000), -EKEYEXPIRED);
	protobuf_c_message_free_unpacked(&ly->base, nullptr);

	/* commit, then the layout reads written */
	Rdfs__CommitReq cm = RDFS__COMMIT_REQ__INIT;
	Rdfs__BlockRange br = RDFS__BLOCK_RANGE__INIT, *brp = &br;
	Rdfs__AttrReply *ar = nullptr;
	br.first = 0;
	br.count = 3 * 1024 * 1024;
	cm.cred = &cr;
	cm.ino = ino;
	cm.size = 3 * 1024 * 1024 - 5;
	cm.written = &brp;
	cm.n_written = 1;
	cm.handle = handle;
	ASSERT_EQ(rpc_call(cl, RDFS_OP_COMMIT, &cm.base, &rdfs__attr_reply__descriptor,
			   (ProtobufCMessage **)&ar, 5000), 0);
	EXPECT_EQ(ar->attr->size, 3u * 1024 * 1024 - 5);
	protobuf_c_message_free_unpacked(&ar->base, nullptr);
	lr.allocate = 0;
	lr.handle = 0;
	ASSERT_EQ(rpc_call(cl, RDFS_OP_LAYOUT, &lr.base, &rdfs__layout_reply__descriptor,
			   (ProtobufCMessage **)&ly, 5000), 0);
	ASSERT_EQ(ly->n_extents, 1u);	/* one server: the three chunks are contiguous */
	EXPECT_FALSE(ly->extents[0]->unwritten);
	/* no handle: rights are what the caller (root) may do */
	EXPECT_EQ(ly->caps[0]->rights, (uint32_t)(RDFS_CAP_READ | RDFS_CAP_WRITE));
	EXPECT_EQ(ly->size, 3u * 1024 * 1024 - 5);
	protobuf_c_message_free_unpacked(&ly->base, nullptr);

	/* statfs and the server list see the registered volume */
	Rdfs__StatfsReq sf = RDFS__STATFS_REQ__INIT;
	Rdfs__StatfsReply *sr = nullptr;
	sf.cred = &cr;
	ASSERT_EQ(rpc_call(cl, RDFS_OP_STATFS, &sf.base, &rdfs__statfs_reply__descriptor,
			   (ProtobufCMessage **)&sr, 5000), 0);
	EXPECT_EQ(sr->total_blocks, 100000u);
	EXPECT_EQ(sr->free_blocks, 100000u - 768);
	EXPECT_EQ(sr->block_size, 4096u);
	EXPECT_EQ(sr->name_max, 255u);
	protobuf_c_message_free_unpacked(&sr->base, nullptr);

	/* the I/O server goes away: it is down */
	rpc_client_close(io);
	EXPECT_TRUE(eventually([&]() {
		Rdfs__ServerListReply *sl = nullptr;
		bool down = false;

		if (rpc_call(cl, RDFS_OP_SERVER_LIST, nullptr, &rdfs__server_list_reply__descriptor,
			     (ProtobufCMessage **)&sl, 5000) == 0) {
			down = sl->n_servers == 1 && !sl->servers[0]->up;
			protobuf_c_message_free_unpacked(&sl->base, nullptr);
		}
		return down;
	}));
	rpc_client_close(cl);
}

TEST_F(MsServerTest, ClosedConnectionReleasesItsHandles)
{
	struct rpc_client *a = connect("client"), *b = connect("client");
	Rdfs__Cred cr;
	Rdfs__MknodReq mk = RDFS__MKNOD_REQ__INIT;
	Rdfs__EntryReply *er = nullptr;

	mk.cred = cred(&cr, 0);
	mk.parent = 1;
	mk.name = (char *)"f";
	mk.open = 1;
	mk.open_flags = O_RDWR;
	ASSERT_EQ(rpc_call(a, RDFS_OP_MKNOD, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), 0);
	uint64_t ino = er->attr->ino;
	protobuf_c_message_free_unpacked(&er->base, nullptr);
	Rdfs__UnlinkReq ul = RDFS__UNLINK_REQ__INIT;
	ul.cred = &cr;
	ul.parent = 1;
	ul.name = (char *)"f";
	ASSERT_EQ(rpc_call(b, RDFS_OP_UNLINK, &ul.base, &rdfs__empty__descriptor, nullptr, 5000), 0);
	Rdfs__GetattrReq ga = RDFS__GETATTR_REQ__INIT;
	Rdfs__AttrReply *ar = nullptr;
	ga.cred = &cr;
	ga.ino = ino;
	ASSERT_EQ(rpc_call(b, RDFS_OP_GETATTR, &ga.base, &rdfs__attr_reply__descriptor,
			   (ProtobufCMessage **)&ar, 5000), 0);
	EXPECT_EQ(ar->attr->nlink, 0u);
	protobuf_c_message_free_unpacked(&ar->base, nullptr);
	rpc_client_close(a);
	EXPECT_TRUE(eventually([&]() {
		return rpc_call(b, RDFS_OP_GETATTR, &ga.base, &rdfs__attr_reply__descriptor,
				nullptr, 5000) == -ENOENT;
	}));
	rpc_client_close(b);
}

class MsRootSquashTest : public MsServerTest {
protected:
	void SetUp() override
	{
		root_squash = 1;
		MsServerTest::SetUp();
	}
};

/* Squash follows the key, not the claim: "tool" or "ioserver" with the cluster secret is a client. */
TEST_F(MsRootSquashTest, RootOfClientsActsAsNobody)
{
	struct rpc_client *c = connect("client"), *t = connect("server");
	struct rpc_client *claims[] = { connect("tool"), connect("ioserver"), connect("Client") };
	Rdfs__Cred cr;
	Rdfs__MkdirReq mk = RDFS__MKDIR_REQ__INIT;
	Rdfs__EntryReply *er = nullptr;

	mk.cred = cred(&cr, 0);
	mk.parent = 1;
	mk.name = (char *)"d";
	mk.mode = 0755;
	EXPECT_EQ(rpc_call(c, RDFS_OP_MKDIR, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), -EACCES);
	for (struct rpc_client *x : claims) {
		EXPECT_EQ(rpc_call(x, RDFS_OP_MKDIR, &mk.base, &rdfs__entry_reply__descriptor,
				   (ProtobufCMessage **)&er, 5000), -EACCES);
		rpc_client_close(x);
	}
	ASSERT_EQ(rpc_call(t, RDFS_OP_MKDIR, &mk.base, &rdfs__entry_reply__descriptor,
			   (ProtobufCMessage **)&er, 5000), 0);
	EXPECT_EQ(er->attr->uid, 0u);
	protobuf_c_message_free_unpacked(&er->base, nullptr);
	rpc_client_close(c);
	rpc_client_close(t);
}
