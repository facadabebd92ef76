// SPDX-License-Identifier: MIT
/*
 * lib_verbs_credit_test.cc - the verbs send window without hardware: the rules
 * one by one, then two simulated peers exchanging messages through a model
 * of posted receive buffers, where a send into a peer with no buffer posted
 * (an RNR on real hardware) fails the test: the window is never overrun,
 * traffic never deadlocks, a paused receiver stops the sender, and CREDIT
 * messages never bounce back and forth forever.
 */
#include <errno.h>

#include <deque>
#include <random>

#include <gtest/gtest.h>

extern "C" {
#include "xport_verbs_credit.h"
}

namespace {

struct Msg {
	bool credit_only;
	uint16_t credits;
};

/* One side of a connection: its window on the peer and its own posted receives. */
struct Peer {
	struct verbs_credits cr;
	uint32_t posted;		/* our receive buffers posted */
	uint32_t held = 0;		/* consumed while paused: not reposted */
	bool paused = false;
	int to_send = 0;		/* data messages the application wants sent */
	int received = 0;		/* data messages delivered */
	int credit_msgs = 0;		/* explicit CREDIT messages sent */
	std::deque<Msg> inbox;		/* arrived, not yet processed */
};

void init(Peer &a, uint32_t a_window, Peer &b, uint32_t b_window)
{
	verbs_credit_init(&a.cr, b_window, a_window);
	verbs_credit_init(&b.cr, a_window, b_window);
	a.posted = a_window;
	b.posted = b_window;
}

/* @from sends one message to @to; a send with no receive posted fails the test. */
void deliver(Peer &from, Peer &to, bool credit_only)
{
	Msg m = { credit_only, 0 };

	ASSERT_EQ(0, verbs_credit_take(&from.cr, credit_only, &m.credits));
	ASSERT_GT(to.posted, 0u) << "window overrun: the receiver had no buffer posted";
	to.posted--;
	to.inbox.push_back(m);
	if (credit_only)
		from.credit_msgs++;
}

/* Process what arrived; return whether anything happened. */
bool receive(Peer &p)
{
	bool any = !p.inbox.empty();

	while (!p.inbox.empty()) {
		Msg m = p.inbox.front();

		p.inbox.pop_front();
		EXPECT_EQ(0, verbs_credit_grant(&p.cr, m.credits));
		if (m.credit_only) {
			p.posted++;
			verbs_credit_reposted(&p.cr, 1);
			continue;
		}
		if (p.paused) {
			p.held++;
			continue;
		}
		p.received++;
		p.posted++;
		verbs_credit_reposted(&p.cr, 1);
	}
	return any;
}

void resume(Peer &p)
{
	p.paused = false;
	p.received += (int)p.held;
	p.posted += p.held;
	verbs_credit_reposted(&p.cr, p.held);
	p.held = 0;
}

/* The module's flush: data while allowed, then an explicit CREDIT if due. */
bool flush(Peer &p, Peer &to)
{
	bool any = false;

	while (p.to_send && verbs_credit_can_send(&p.cr, 0)) {
		deliver(p, to, false);
		p.to_send--;
		any = true;
	}
	if (verbs_credit_explicit_due(&p.cr)) {
		deliver(p, to, true);
		any = true;
	}
	return any;
}

/* Run both sides until nothing moves; return the number of rounds. */
int run(Peer &a, Peer &b, int max_rounds = 100000)
{
	int rounds = 0;
	bool moved = true;

	while (moved && rounds < max_rounds) {
		moved = false;
		moved |= flush(a, b);
		moved |= flush(b, a);
		moved |= receive(a);
		moved |= receive(b);
		rounds++;
	}
	return rounds;
}

} // namespace

TEST(VerbsCredit, LastCreditIsKeptForACreditReturn)
{
	struct verbs_credits c;
	uint16_t ret;

	verbs_credit_init(&c, 4, 8);
	EXPECT_EQ(0, verbs_credit_take(&c, 0, &ret));
	EXPECT_EQ(0, verbs_credit_take(&c, 0, &ret));
	EXPECT_EQ(0, verbs_credit_take(&c, 0, &ret));
	EXPECT_EQ(1u, c.avail);
	EXPECT_FALSE(verbs_credit_can_send(&c, 0));
	EXPECT_EQ(-EAGAIN, verbs_credit_take(&c, 0, &ret));
	EXPECT_TRUE(verbs_credit_can_send(&c, 1));
	EXPECT_EQ(0, verbs_credit_take(&c, 1, &ret));
	EXPECT_EQ(-EAGAIN, verbs_credit_take(&c, 1, &ret));
}

TEST(VerbsCredit, OwedCreditsRideOnTheNextMessage)
{
	struct verbs_credits c;
	uint16_t ret = 99;

	verbs_credit_init(&c, 8, 8);
	verbs_credit_reposted(&c, 3);
	ASSERT_EQ(0, verbs_credit_take(&c, 0, &ret));
	EXPECT_EQ(3, ret);
	ASSERT_EQ(0, verbs_credit_take(&c, 0, &ret));
	EXPECT_EQ(0, ret);
}

TEST(VerbsCredit, GrantBeyondTheWindowIsEproto)
{
	struct verbs_credits c;
	uint16_t ret;

	verbs_credit_init(&c, 4, 4);
	EXPECT_EQ(-EPROTO, verbs_credit_grant(&c, 1));
	verbs_credit_take(&c, 0, &ret);
	verbs_credit_take(&c, 0, &ret);
	EXPECT_EQ(0, verbs_credit_grant(&c, 2));
	EXPECT_EQ(4u, c.avail);
	EXPECT_EQ(-EPROTO, verbs_credit_grant(&c, 1));
}

TEST(VerbsCredit, ExplicitCreditDueAtHalfTheWindow)
{
	struct verbs_credits c;

	verbs_credit_init(&c, 16, 16);
	verbs_credit_reposted(&c, 7);
	EXPECT_FALSE(verbs_credit_explicit_due(&c));
	verbs_credit_reposted(&c, 1);
	EXPECT_TRUE(verbs_credit_explicit_due(&c));
	/* Smallest window: the threshold stays 2, so a CREDIT never answers a CREDIT. */
	verbs_credit_init(&c, 4, 4);
	EXPECT_EQ(2u, c.threshold);
}

TEST(VerbsCredit, OneWayFloodNeverOverrunsAndCompletes)
{
	Peer a, b;

	init(a, 4, b, 4);
	a.to_send = 10000;
	run(a, b);
	EXPECT_EQ(0, a.to_send);
	EXPECT_EQ(10000, b.received);
	EXPECT_TRUE(b.inbox.empty() && a.inbox.empty());
}

TEST(VerbsCredit, RequestReplyNeedsFewExplicitCredits)
{
	Peer a, b;

	init(a, 64, b, 64);
	for (int i = 0; i < 1000; i++) {
		a.to_send = 1;
		run(a, b);
		b.to_send = 1;		/* the reply */
		run(a, b);
	}
	EXPECT_EQ(1000, a.received);
	EXPECT_EQ(1000, b.received);
	/* Replies carry the requests' credits; CREDITs only for the replies' own. */
	EXPECT_LT(a.credit_msgs + b.credit_msgs, 1000 / 16);
}

TEST(VerbsCredit, RandomTrafficBothWaysNeverDeadlocks)
{
	std::mt19937 rng(42);

	for (uint32_t wa : { 4u, 5u, 8u, 64u }) {
		for (uint32_t wb : { 4u, 7u, 32u }) {
			Peer a, b;
			int sent_a = 0, sent_b = 0;

			init(a, wa, b, wb);
			for (int round = 0; round < 200; round++) {
				int x = (int)(rng() % 50), y = (int)(rng() % 50);

				a.to_send += x;
				b.to_send += y;
				sent_a += x;
				sent_b += y;
				flush(a, b);
				receive(b);
				flush(b, a);
				receive(a);
			}
			run(a, b);
			EXPECT_EQ(sent_a, b.received) << wa << " " << wb;
			EXPECT_EQ(sent_b, a.received) << wa << " " << wb;
			/* Quiet at the end: no CREDIT ping-pong keeps it busy. */
			EXPECT_FALSE(flush(a, b) || flush(b, a));
		}
	}
}

TEST(VerbsCredit, PausedReceiverStopsTheSenderWithoutLosingAnything)
{
	Peer a, b;

	init(a, 8, b, 8);
	b.paused = true;
	a.to_send = 100;
	run(a, b);
	/* All buffers but the reserve hold messages, nothing was returned. */
	EXPECT_EQ(0, b.received);
	EXPECT_EQ(7u, b.held);
	EXPECT_EQ(93, a.to_send);
	EXPECT_FALSE(verbs_credit_can_send(&a.cr, 0));
	/* The paused side owes nothing it could return. */
	EXPECT_EQ(0u, b.cr.owed);

	resume(b);
	run(a, b);
	EXPECT_EQ(100, b.received);
	EXPECT_EQ(0, a.to_send);
}
