// SPDX-License-Identifier: MIT
/*
 * xport_verbs_credit.c - send-window bookkeeping of a verbs connection; the
 * rules and why they cannot deadlock are in xport_verbs_credit.h.
 */
#include <errno.h>

#include "xport_verbs_credit.h"

void verbs_credit_init(struct verbs_credits *c, uint32_t peer_window, uint32_t our_window)
{
	c->window = peer_window;
	c->avail = peer_window;
	c->owed = 0;
	/* At least 2, or each CREDIT would be answered by a CREDIT forever. */
	c->threshold = our_window / 2 > 2 ? our_window / 2 : 2;
}

int verbs_credit_can_send(const struct verbs_credits *c, int explicit_credit)
{
	return explicit_credit ? c->avail >= 1 : c->avail >= 2;
}

int verbs_credit_take(struct verbs_credits *c, int explicit_credit, uint16_t *returned)
{
	uint32_t n = c->owed > UINT16_MAX ? UINT16_MAX : c->owed;

	if (!verbs_credit_can_send(c, explicit_credit))
		return -EAGAIN;
	c->avail--;
	c->owed -= n;
	*returned = (uint16_t)n;
	return 0;
}

int verbs_credit_grant(struct verbs_credits *c, uint32_t n)
{
	if (n > c->window - c->avail)
		return -EPROTO;
	c->avail += n;
	return 0;
}

void verbs_credit_reposted(struct verbs_credits *c, uint32_t n)
{
	c->owed += n;
}

int verbs_credit_explicit_due(const struct verbs_credits *c)
{
	return c->owed >= c->threshold && verbs_credit_can_send(c, 1);
}
