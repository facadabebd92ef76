// SPDX-License-Identifier: MIT
/*
 * xport_verbs_rndv.c - the sender's rendezvous table and the receiver's READ
 * planning (protocol in xport_verbs_rndv.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "xport_verbs_rndv.h"

#define COOKIE_IDX(c)	((c) & 0xffffu)
#define COOKIE_GEN(c)	((uint16_t)((c) >> 16))

int verbs_rndv_table_init(struct verbs_rndv_table *t, uint32_t nslots)
{
	if (nslots == 0 || nslots > 65536)
		return -EINVAL;
	t->slots = calloc(nslots, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->nslots = nslots;
	t->used = 0;
	t->hint = 0;
	return 0;
}

void verbs_rndv_table_fini(struct verbs_rndv_table *t)
{
	free(t->slots);
	t->slots = NULL;
	t->nslots = 0;
}

int verbs_rndv_alloc(struct verbs_rndv_table *t, void *priv, uint32_t *cookie)
{
	struct verbs_rndv_slot *s;
	uint32_t i, idx;

	if (t->used == t->nslots)
		return -EAGAIN;
	for (i = 0; i < t->nslots; i++) {
		idx = (t->hint + i) % t->nslots;
		s = &t->slots[idx];
		if (s->state != RNDV_FREE)
			continue;
		s->gen++;	/* a new name for every use of the slot */
		s->state = RNDV_REGISTERED;
		s->priv = priv;
		t->used++;
		t->hint = (idx + 1) % t->nslots;
		*cookie = (uint32_t)s->gen << 16 | idx;
		return 0;
	}
	return -EAGAIN;
}

static struct verbs_rndv_slot *slot_of(struct verbs_rndv_table *t, uint32_t cookie)
{
	struct verbs_rndv_slot *s;

	if (COOKIE_IDX(cookie) >= t->nslots)
		return NULL;
	s = &t->slots[COOKIE_IDX(cookie)];
	if (s->state == RNDV_FREE || s->gen != COOKIE_GEN(cookie))
		return NULL;
	return s;
}

int verbs_rndv_announce(struct verbs_rndv_table *t, uint32_t cookie)
{
	struct verbs_rndv_slot *s = slot_of(t, cookie);

	if (!s || s->state != RNDV_REGISTERED)
		return -EPROTO;
	s->state = RNDV_ANNOUNCED;
	return 0;
}

static void *slot_free(struct verbs_rndv_table *t, struct verbs_rndv_slot *s)
{
	void *priv = s->priv;

	s->state = RNDV_FREE;
	s->priv = NULL;
	t->used--;
	return priv;
}

void *verbs_rndv_finish(struct verbs_rndv_table *t, uint32_t cookie)
{
	struct verbs_rndv_slot *s = slot_of(t, cookie);

	if (!s || s->state != RNDV_ANNOUNCED)
		return NULL;
	return slot_free(t, s);
}

void *verbs_rndv_take_any(struct verbs_rndv_table *t)
{
	uint32_t i;

	for (i = 0; t->used && i < t->nslots; i++)
		if (t->slots[i].state != RNDV_FREE)
			return slot_free(t, &t->slots[i]);
	return NULL;
}

int verbs_read_next(const struct verbs_desc *d, uint32_t n, uint32_t body_len, uint32_t chunk,
		    struct verbs_read_iter *it, struct verbs_read *r)
{
	uint32_t left;

	while (it->idx < n && it->done == d[it->idx].len) {
		it->idx++;
		it->done = 0;
	}
	if (it->idx >= n)
		return 0;
	left = d[it->idx].len - it->done;
	r->len = left < chunk ? left : chunk;
	r->raddr = d[it->idx].addr + it->done;
	r->rkey = d[it->idx].rkey;
	/* Descriptor 0 is exactly the body when it is remote: no READ straddles it. */
	r->to_body = it->pos < body_len;
	r->off = (uint32_t)(r->to_body ? it->pos : it->pos - body_len);
	it->done += r->len;
	it->pos += r->len;
	return 1;
}
