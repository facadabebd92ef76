// SPDX-License-Identifier: MIT
/*
 * lib_verbs_regcache_test.cc - the registration cache without hardware
 * (registration is a counting stub): declared ranges and their lookups,
 * overlaps, hits, LRU eviction under the byte bound with in-use entries
 * protected, and invalidation when a range is undeclared, also while in use.
 */
#include <errno.h>
#include <stdint.h>

#include <map>
#include <vector>

#include <gtest/gtest.h>

extern "C" {
#include "xport.h"
#include "xport_verbs_regcache.h"
}

namespace {

/* Registrations as a device would hold them: handle -> start address. */
struct FakeDevice {
	struct Live {
		std::map<uintptr_t, uintptr_t> by_handle;

		size_t count(uintptr_t start) const
		{
			size_t n = 0;

			for (auto &kv : by_handle)
				n += kv.second == start;
			return n;
		}
		size_t size() const { return by_handle.size(); }
		bool empty() const { return by_handle.empty(); }
	} live;
	uintptr_t next_handle = 1;
	int regs = 0, deregs = 0;
	int fail_next = 0;
};

int fake_reg(void *arg, uintptr_t start, size_t len, void **handle)
{
	auto *d = static_cast<FakeDevice *>(arg);

	if (d->fail_next) {
		d->fail_next = 0;
		return -ENOMEM;
	}
	d->live.by_handle[d->next_handle] = start;
	*handle = reinterpret_cast<void *>(d->next_handle++);
	d->regs++;
	return 0;
}

void fake_dereg(void *arg, void *handle)
{
	auto *d = static_cast<FakeDevice *>(arg);

	EXPECT_EQ(1u, d->live.by_handle.erase(reinterpret_cast<uintptr_t>(handle)));
	d->deregs++;
}

const struct verbs_reg_ops fake_ops = { fake_reg, fake_dereg };

void *addr(uintptr_t a)
{
	return reinterpret_cast<void *>(a);
}

struct verbs_range range(uintptr_t start, size_t len)
{
	struct verbs_range r = { start, len };

	return r;
}

} // namespace

TEST(VerbsRegcache, DeclaredRangesAndLookups)
{
	struct verbs_decl_set s;
	struct verbs_range r;

	verbs_decl_init(&s);
	ASSERT_EQ(0, verbs_decl_add(&s, addr(0x10000), 0x4000));
	ASSERT_EQ(0, verbs_decl_add(&s, addr(0x20000), 0x1000));
	ASSERT_EQ(0, verbs_decl_add(&s, addr(0x14000), 0x1000));	/* adjacent is fine */
	EXPECT_EQ(-EEXIST, verbs_decl_add(&s, addr(0x13fff), 2));
	EXPECT_EQ(-EEXIST, verbs_decl_add(&s, addr(0x0f000), 0x20000));
	EXPECT_EQ(-EINVAL, verbs_decl_add(&s, addr(0x90000), 0));

	ASSERT_EQ(0, verbs_decl_find(&s, addr(0x11000), 0x100, &r));
	EXPECT_EQ(0x10000u, r.start);
	EXPECT_EQ(0x4000u, r.len);
	ASSERT_EQ(0, verbs_decl_find(&s, addr(0x10000), 0x4000, &r));
	/* Spanning two adjacent declarations, past an end, outside: not cached. */
	EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(0x13000), 0x2000, &r));
	EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(0x20800), 0x1000, &r));
	EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(0x30000), 1, &r));
	EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(0x10000), 0, &r));

	EXPECT_EQ(-ENOENT, verbs_decl_remove(&s, addr(0x10000), 0x1000));	/* not exact */
	EXPECT_EQ(0, verbs_decl_remove(&s, addr(0x10000), 0x4000));
	EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(0x11000), 1, &r));
	EXPECT_EQ(0, verbs_decl_find(&s, addr(0x14000), 1, &r));
	verbs_decl_fini(&s);
}

TEST(VerbsRegcache, ManyDeclarationsStaySorted)
{
	struct verbs_decl_set s;
	struct verbs_range r;

	verbs_decl_init(&s);
	for (uintptr_t i = 100; i > 0; i--)
		ASSERT_EQ(0, verbs_decl_add(&s, addr(i * 0x10000), 0x8000));
	for (uintptr_t i = 1; i <= 100; i++) {
		ASSERT_EQ(0, verbs_decl_find(&s, addr(i * 0x10000 + 0x7fff), 1, &r)) << i;
		EXPECT_EQ(i * 0x10000, r.start);
		EXPECT_EQ(-ENOENT, verbs_decl_find(&s, addr(i * 0x10000 + 0x8000), 1, &r));
	}
	verbs_decl_fini(&s);
}

TEST(VerbsRegcache, SecondUseIsAHit)
{
	FakeDevice dev;
	struct verbs_regcache rc;
	struct verbs_reg_entry *e1, *e2;
	auto r = range(0x100000, 0x10000);

	verbs_regcache_init(&rc, &fake_ops, &dev, 1 << 20);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &r, &e1));
	ASSERT_EQ(0, verbs_regcache_get(&rc, &r, &e2));
	EXPECT_EQ(e1, e2);
	EXPECT_EQ(1, dev.regs);
	EXPECT_EQ(1u, rc.hits);
	verbs_regcache_put(&rc, e1);
	verbs_regcache_put(&rc, e2);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &r, &e1));
	EXPECT_EQ(1, dev.regs);
	verbs_regcache_put(&rc, e1);
	verbs_regcache_fini(&rc);
	EXPECT_EQ(1, dev.deregs);
	EXPECT_TRUE(dev.live.empty());
}

TEST(VerbsRegcache, LeastRecentlyUsedIdleEntryIsEvicted)
{
	FakeDevice dev;
	struct verbs_regcache rc;
	struct verbs_reg_entry *a, *b, *c, *d;
	auto ra = range(0x100000, 0x1000), rb = range(0x200000, 0x1000),
	     rcr = range(0x300000, 0x1000), rd = range(0x400000, 0x1000);

	verbs_regcache_init(&rc, &fake_ops, &dev, 0x3000);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &ra, &a));
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rb, &b));
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rcr, &c));
	verbs_regcache_put(&rc, b);
	verbs_regcache_put(&rc, c);
	/* a is the oldest but in use: b goes. */
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rd, &d));
	EXPECT_EQ(1u, rc.evictions);
	EXPECT_EQ(0u, dev.live.count(0x200000));
	EXPECT_EQ(1u, dev.live.count(0x100000));
	EXPECT_EQ(1u, dev.live.count(0x300000));
	EXPECT_LE(rc.bytes, rc.max_bytes);
	/* b again: a miss, registered anew (c is now the LRU idle one). */
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rb, &b));
	EXPECT_EQ(0u, dev.live.count(0x300000));
	EXPECT_EQ(5, dev.regs);
	verbs_regcache_put(&rc, a);
	verbs_regcache_put(&rc, b);
	verbs_regcache_put(&rc, d);
	verbs_regcache_fini(&rc);
	EXPECT_TRUE(dev.live.empty());
}

TEST(VerbsRegcache, AllInUseGoesOverTheBoundRatherThanFail)
{
	FakeDevice dev;
	struct verbs_regcache rc;
	struct verbs_reg_entry *a, *b;
	auto ra = range(0x100000, 0x2000), rb = range(0x200000, 0x2000);

	verbs_regcache_init(&rc, &fake_ops, &dev, 0x2000);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &ra, &a));
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rb, &b));
	EXPECT_EQ(2u, dev.live.size());
	verbs_regcache_put(&rc, a);
	verbs_regcache_put(&rc, b);
	verbs_regcache_fini(&rc);
}

TEST(VerbsRegcache, FailedRegistrationIsReportedAndNotCached)
{
	FakeDevice dev;
	struct verbs_regcache rc;
	struct verbs_reg_entry *a;
	auto ra = range(0x100000, 0x2000);

	verbs_regcache_init(&rc, &fake_ops, &dev, 1 << 20);
	dev.fail_next = 1;
	EXPECT_EQ(-ENOMEM, verbs_regcache_get(&rc, &ra, &a));
	EXPECT_EQ(0u, rc.bytes);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &ra, &a));
	verbs_regcache_put(&rc, a);
	verbs_regcache_fini(&rc);
}

TEST(VerbsRegcache, InvalidateDropsNowOrAtTheLastPut)
{
	FakeDevice dev;
	struct verbs_regcache rc;
	struct verbs_reg_entry *a, *b, *a2;
	auto ra = range(0x100000, 0x2000), rb = range(0x200000, 0x2000);

	verbs_regcache_init(&rc, &fake_ops, &dev, 1 << 20);
	ASSERT_EQ(0, verbs_regcache_get(&rc, &ra, &a));
	ASSERT_EQ(0, verbs_regcache_get(&rc, &rb, &b));
	verbs_regcache_put(&rc, b);

	verbs_regcache_invalidate(&rc, &rb);		/* idle: gone now */
	EXPECT_EQ(0u, dev.live.count(0x200000));
	verbs_regcache_invalidate(&rc, &ra);		/* in use: kept until its send ends */
	EXPECT_EQ(1u, dev.live.count(0x100000));
	/* The range is declared again (new memory at the same address): never the old entry. */
	ASSERT_EQ(0, verbs_regcache_get(&rc, &ra, &a2));
	EXPECT_NE(a, a2);
	verbs_regcache_put(&rc, a);
	EXPECT_EQ(3, dev.regs);
	verbs_regcache_put(&rc, a2);
	verbs_regcache_fini(&rc);
	EXPECT_TRUE(dev.live.empty());
}

TEST(VerbsRegcache, PublicDeclarationApi)
{
	static char buf[8192];

	ASSERT_EQ(0, xport_mem_register(buf, sizeof(buf)));
	EXPECT_EQ(-EEXIST, xport_mem_register(buf + 100, 10));
	EXPECT_EQ(-EINVAL, xport_mem_register(buf, 0));
	EXPECT_EQ(-ENOENT, xport_mem_deregister(buf, 10));
	EXPECT_EQ(0, xport_mem_deregister(buf, sizeof(buf)));
	EXPECT_EQ(-ENOENT, xport_mem_deregister(buf, sizeof(buf)));
}

extern "C" {
/* xport_module.h (internal to lib/): the transport's recycled bulk buffers. */
void *xport_data_alloc(size_t len);
void xport_data_free(void *buf, size_t len);
}

/* Whether [p, p+len) lies in a declared range (a probe that leaves none behind). */
static bool declared(void *p, size_t len)
{
	int err = xport_mem_register(p, len);

	if (err == 0) {
		EXPECT_EQ(0, xport_mem_deregister(p, len));
	}
	return err == -EEXIST;
}

/*
 * The transport's recycled bulk buffers are declared from their allocation
 * until their free(), so an RDMA module may keep them registered while they
 * are recycled (a rendezvous READ into one needs no registration), and no
 * registration ever outlives the memory. Small ones are plain allocations.
 */
TEST(VerbsRegcache, RecycledBulkBuffersAreDeclaredWhileTheyLive)
{
	const size_t len = 1u << 20;
	std::vector<void *> first, again;

	/* more than the pool keeps: some are recycled, the rest freed */
	for (int i = 0; i < 40; i++) {
		first.push_back(xport_data_alloc(len));
		ASSERT_NE(nullptr, first.back());
		EXPECT_TRUE(declared(first.back(), len));
	}
	for (void *p : first)
		xport_data_free(p, len);
	for (int i = 0; i < 40; i++)
		again.push_back(xport_data_alloc(len));
	for (void *p : first) {
		bool live = false;

		/* in a buffer handed out again (recycled, or fresh over the same place) */
		for (void *q : again)
			live |= (uint8_t *)q <= (uint8_t *)p && (uint8_t *)p < (uint8_t *)q + len;
		EXPECT_EQ(live, declared(p, 1));
	}
	for (void *p : again)
		xport_data_free(p, len);

	void *small = xport_data_alloc(1000);
	ASSERT_NE(nullptr, small);
	EXPECT_FALSE(declared(small, 1000));
	xport_data_free(small, 1000);
}
