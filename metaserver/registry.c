// SPDX-License-Identifier: MIT
/*
 * registry.c - the I/O servers: a stable id per volume uuid (persisted), the
 * URL, name and capacity each last registered with, and whether its
 * registration connection is alive (up). A volume's first registration also
 * sets its high-water mark (high_water.c): 0 for a volume its I/O server
 * vouches is pristine, else the capacity. Registrations are rare, so the one
 * registry mutex is also held across their small synced write; the hot paths
 * only copy the up list under it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cap.h"
#include "log.h"
#include "ms_int.h"

/* Server record flags (the byte after the label). */
#define MS_SRV_READ_ONLY	1u
/* Room for the longest server record. */
#define SERVER_REC_MAX		(8 + 2 + 64 + 2 + 256 + 2 + 256 + 2 + 64 + 2 + MS_LABEL_MAX + 1)

static int server_decode(const uint8_t *p, size_t len, struct ms_ioserver *s)
{
	size_t off = 8, l;

	if (len < 8 + 6)
		return -EIO;
	s->capacity = get_le64(p);
	l = p[off] | (size_t)p[off + 1] << 8;
	off += 2;
	if (l > sizeof(s->uuid) || off + l + 2 > len)
		return -EIO;
	memcpy(s->uuid, p + off, l);
	s->uuid_len = l;
	off += l;
	l = p[off] | (size_t)p[off + 1] << 8;
	off += 2;
	if (l >= sizeof(s->url) || off + l + 2 > len)
		return -EIO;
	memcpy(s->url, p + off, l);
	s->url[l] = '\0';
	off += l;
	l = p[off] | (size_t)p[off + 1] << 8;
	off += 2;
	if (l >= sizeof(s->name) || off + l > len)
		return -EIO;
	memcpy(s->name, p + off, l);
	s->name[l] = '\0';
	off += l;
	s->domain[0] = '\0';
	if (off + 2 <= len) {
		l = p[off] | (size_t)p[off + 1] << 8;
		off += 2;
		if (l >= sizeof(s->domain) || off + l > len)
			return -EIO;
		memcpy(s->domain, p + off, l);
		s->domain[l] = '\0';
		off += l;
	}
	/* since rdfs servers: the label, then a flags byte (older metaservers stop before) */
	s->label[0] = '\0';
	s->read_only = 0;
	if (off + 2 <= len) {
		l = p[off] | (size_t)p[off + 1] << 8;
		off += 2;
		if (l >= sizeof(s->label) || off + l > len)
			return -EIO;
		memcpy(s->label, p + off, l);
		s->label[l] = '\0';
		off += l;
	}
	if (off + 1 <= len)
		s->read_only = (p[off] & MS_SRV_READ_ONLY) != 0;
	return 0;
}

static size_t put_str(uint8_t *p, const void *s, size_t l)
{
	p[0] = (uint8_t)l;
	p[1] = (uint8_t)(l >> 8);
	memcpy(p + 2, s, l);
	return 2 + l;
}

static size_t server_encode(const struct ms_ioserver *s, uint8_t *p)
{
	size_t off = 8;

	put_le64(p, s->capacity);
	off += put_str(p + off, s->uuid, s->uuid_len);
	off += put_str(p + off, s->url, strlen(s->url));
	off += put_str(p + off, s->name, strlen(s->name));
	off += put_str(p + off, s->domain, strlen(s->domain));
	/* only a server with a label or a flag has them: older records stay as they were */
	if (s->label[0] || s->read_only) {
		off += put_str(p + off, s->label, strlen(s->label));
		p[off++] = s->read_only ? MS_SRV_READ_ONLY : 0;
	}
	return off;
}

/* Insert keeping the array sorted by id. Caller holds reg->mu (or is single-threaded). */
static struct ms_ioserver *server_insert(struct ms_registry *r, const struct ms_ioserver *s)
{
	struct ms_ioserver *ns = realloc(r->servers, (r->n + 1) * sizeof(*ns));
	int i;

	if (!ns)
		return NULL;
	r->servers = ns;
	for (i = r->n; i > 0 && r->servers[i - 1].id > s->id; i--)
		r->servers[i] = r->servers[i - 1];
	r->servers[i] = *s;
	r->n++;
	return &r->servers[i];
}

/* The last registration epoch handed out (registry.c), persisted with each. */
static const uint8_t key_epoch[] = { MS_TAG_COUNTER, 'e', 'p', 'o', 'c', 'h' };

static struct ms_ioserver *server_find_locked(struct ms_registry *r, uint32_t id);

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int registry_load(struct ms *ms)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ms->db, ms->ropts);
	uint8_t tag = MS_TAG_SERVER;
	int ret = 0;

	for (leveldb_iter_seek(it, (char *)&tag, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		struct ms_ioserver s = { 0 };

		if (kl == 0 || k[0] != MS_TAG_SERVER)
			break;
		if (kl != 5 || server_decode(v, vl, &s)) {
			log_error(1100053, "corrupt server record in the database");
			ret = -EIO;
			break;
		}
		s.id = (uint32_t)k[1] << 24 | (uint32_t)k[2] << 16 | (uint32_t)k[3] << 8 | k[4];
		/* down since we started: the grace for rebuilding its copies runs from now */
		s.down_since_ms = mono_ms();
		if (!server_insert(&ms->reg, &s) || alloc_set_capacity(&ms->alloc, s.id, s.capacity)) {
			ret = -ENOMEM;
			break;
		}
	}
	/* the servers being drained */
	tag = MS_TAG_DRAIN;
	for (leveldb_iter_seek(it, (char *)&tag, 1); !ret && leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		struct ms_ioserver *s;

		if (kl == 0 || k[0] != MS_TAG_DRAIN)
			break;
		s = kl == 5 ? server_find_locked(&ms->reg, (uint32_t)k[1] << 24 |
								(uint32_t)k[2] << 16 |
								(uint32_t)k[3] << 8 | k[4])
			    : NULL;
		if (s)
			s->draining = 1;
	}
	leveldb_iter_destroy(it);
	if (!ret) {
		char *ev;
		size_t el;

		if (ns_get(ms, key_epoch, sizeof(key_epoch), &ev, &el) == 0) {
			if (el == 8)
				ms->reg.last_epoch = get_le64((uint8_t *)ev);
			leveldb_free(ev);
		}
	}
	return ret;
}

void registry_destroy(struct ms_registry *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->servers[i].held);
	free(r->servers);
	r->servers = NULL;
	r->n = 0;
	pthread_mutex_destroy(&r->mu);
}

int registry_alloc_ids(struct ms_registry *r, uint32_t *ids, int max)
{
	int n = 0;

	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n && n < max; i++)
		if (r->servers[i].up && !r->servers[i].draining && !r->servers[i].read_only)
			ids[n++] = r->servers[i].id;
	pthread_mutex_unlock(&r->mu);
	return n;
}

int registry_up_ids(struct ms_registry *r, uint32_t *ids, int max)
{
	int n = 0;

	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n && n < max; i++)
		if (r->servers[i].up)
			ids[n++] = r->servers[i].id;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void registry_start_wait(struct ms_registry *r, int ms)
{
	r->wait_until_ms = ms > 0 && r->n > 0 ? mono_ms() + ms : 0;
}

int registry_ready(struct ms_registry *r, int *up, int *known)
{
	int ret = 0;

	pthread_mutex_lock(&r->mu);
	*known = r->n;
	*up = 0;
	for (int i = 0; i < r->n; i++)
		*up += r->servers[i].up != NULL;
	if (r->wait_until_ms) {
		if (*up < *known && mono_ms() < r->wait_until_ms) {
			ret = -EAGAIN;
		} else {
			r->wait_until_ms = 0;	/* over for good: all are back or time is up */
			if (*up < *known)
				log_warn(1100054,
					 "startup wait over: %d of %d I/O servers registered; "
					 "allocating on those", *up, *known);
		}
	}
	pthread_mutex_unlock(&r->mu);
	return ret;
}

/* Server @id, or NULL. Caller holds r->mu. The array is sorted by id. */
static struct ms_ioserver *server_find_locked(struct ms_registry *r, uint32_t id)
{
	int lo = 0, hi = r->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (r->servers[mid].id == id)
			return &r->servers[mid];
		if (r->servers[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int registry_is_up(struct ms_registry *r, uint32_t id)
{
	struct ms_ioserver *s;
	int up;

	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	up = s && s->up;
	pthread_mutex_unlock(&r->mu);
	return up;
}

uint64_t registry_domain(struct ms_registry *r, uint32_t id)
{
	struct ms_ioserver *s;
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	if (s && s->domain[0]) {
		for (const char *p = s->domain; *p; p++)
			h = (h ^ (uint8_t)*p) * 1099511628211ull;
		h |= 1ull << 63;
	} else {
		h = id;		/* below 2^63: never a named domain's */
	}
	pthread_mutex_unlock(&r->mu);
	return h;
}

int registry_alive(struct ms_registry *r, uint32_t id, int64_t grace_ms)
{
	struct ms_ioserver *s;
	int alive;

	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	alive = s && !s->draining && (s->up || mono_ms() - s->down_since_ms < grace_ms);
	pthread_mutex_unlock(&r->mu);
	return alive;
}

void registry_session_closed(struct ms_registry *r, struct ms_session *s)
{
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++)
		if (r->servers[i].up == s) {
			r->servers[i].up = NULL;
			r->servers[i].down_since_ms = mono_ms();
			log_info(1100055,
				 "I/O server %u (%s) is down", r->servers[i].id, r->servers[i].url);
		}
	pthread_mutex_unlock(&r->mu);
}

int ms_register(struct ms *ms, struct ms_session *sess, const char *url, const void *uuid,
		size_t uuid_len, uint64_t capacity_blocks, const char *name, const char *domain,
		int pristine, uint32_t *id, uint64_t *epoch)
{
	struct ms_registry *r = &ms->reg;
	struct ms_ioserver *s = NULL, tmp = { 0 };
	uint8_t k[MS_KEY_MAX], v[SERVER_REC_MAX];
	leveldb_writebatch_t *b;
	/*
	 * A new volume reads as zeros only when its I/O server created it sparse
	 * and never registered it; any other (an old file or device formatted in
	 * place, a volume of a lost database) may hold data in every block.
	 */
	uint64_t mark = pristine ? 0 : capacity_blocks;
	int ret = 0;

	if (!ms_session_is_server(sess)) {
		log_warn(1100056,
			 "REGISTER of %s refused: the peer did not prove the server key", url);
		return -EPERM;
	}
	/* past it the map would not fit in memory, or its size not in 64 bits */
	if (capacity_blocks > MS_MAX_VOLUME_BLOCKS) {
		log_warn(1100057, "REGISTER of %s refused: %llu blocks, more than the %llu a volume may have",
			 url, (unsigned long long)capacity_blocks,
			 (unsigned long long)MS_MAX_VOLUME_BLOCKS);
		return -EINVAL;
	}
	if (uuid_len == 0 || uuid_len > sizeof(tmp.uuid) || strlen(url) == 0 ||
	    strlen(url) >= sizeof(tmp.url) || strlen(name) >= sizeof(tmp.name) ||
	    strlen(domain) >= sizeof(tmp.domain))
		return -EINVAL;

	/* its held blocks go back to the maps below: fsck waits (ms->blocks_rw) */
	pthread_rwlock_rdlock(&ms->blocks_rw);
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++)
		if (r->servers[i].uuid_len == uuid_len &&
		    memcmp(r->servers[i].uuid, uuid, uuid_len) == 0)
			s = &r->servers[i];
	if (s && s->up && s->up != sess) {
		/* a second registration of a live server is an impostor or a misconfiguration */
		log_warn(1100058,
			 "I/O server %u (%s) is up; a second registration of its volume from %s "
			 "refused", s->id, s->url, url);
		ret = -EBUSY;
		goto out;
	}
	if (s && capacity_blocks < s->capacity) {
		/*
		 * A volume's capacity is in its superblock and never shrinks; a
		 * registration that says less would leave the layouts naming blocks
		 * past its end, which no I/O server serves and fsck reports. Lowered
		 * at once in the maps (if at all), so no LAYOUT allocates past it
		 * meanwhile; put back if the write below fails.
		 */
		ret = alloc_shrink(&ms->alloc, s->id, capacity_blocks);
		if (ret) {
			log_warn(1100059,
				 "I/O server %u (%s): a registration with %llu blocks refused: "
				 "blocks past that are in use", s->id, s->url,
				 (unsigned long long)capacity_blocks);
			ret = -EINVAL;
			goto out;
		}
	}
	if (s) {
		tmp = *s;
		tmp.held = NULL;	/* s keeps them until the registration is in */
		tmp.nheld = tmp.held_cap = 0;
	} else {
		tmp.id = r->n ? r->servers[r->n - 1].id + 1 : 1;
		memcpy(tmp.uuid, uuid, uuid_len);
		tmp.uuid_len = uuid_len;
	}
	snprintf(tmp.url, sizeof(tmp.url), "%s", url);
	snprintf(tmp.name, sizeof(tmp.name), "%s", name);
	snprintf(tmp.domain, sizeof(tmp.domain), "%s", domain);
	tmp.capacity = capacity_blocks;
	/*
	 * A new epoch per registration, larger than every earlier one, across
	 * restarts too: the clock, but never below the last one handed out (a
	 * clock stepped back must not make a server refuse every capability).
	 */
	tmp.epoch = (uint64_t)cap_now_ns();
	if (tmp.epoch <= r->last_epoch)
		tmp.epoch = r->last_epoch + 1;

	b = leveldb_writebatch_create();
	{
		uint8_t ev[8];

		put_le64(ev, tmp.epoch);
		leveldb_writebatch_put(b, (const char *)key_epoch, sizeof(key_epoch),
				       (char *)ev, 8);
	}
	if (!s || strcmp(s->url, tmp.url) || strcmp(s->name, tmp.name) ||
	    strcmp(s->domain, tmp.domain) || s->capacity != tmp.capacity) {
		uint8_t idv[4];
		size_t ukl;

		leveldb_writebatch_put(b, (char *)k, key_server(k, tmp.id), (char *)v,
				       server_encode(&tmp, v));
		k[0] = MS_TAG_UUID;
		memcpy(k + 1, uuid, uuid_len);
		ukl = 1 + uuid_len;
		put_le32(idv, tmp.id);
		leveldb_writebatch_put(b, (char *)k, ukl, (char *)idv, 4);
		if (!s)
			high_water_put(b, tmp.id, mark);
	}
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	if (ret) {
		if (s && capacity_blocks < s->capacity)
			alloc_set_capacity(&ms->alloc, s->id, s->capacity);
		goto out;
	}
	r->last_epoch = tmp.epoch;
	ret = alloc_set_capacity(&ms->alloc, tmp.id, capacity_blocks);
	if (ret)
		goto out;
	if (!s)
		alloc_high_water_set(&ms->alloc, tmp.id, mark);
	tmp.up = sess;
	if (s) {
		/* what its old registration missed can no longer be reached: free it */
		for (size_t i = 0; i < s->nheld; i++)
			alloc_free(&ms->alloc, s->held[i].server_id, s->held[i].block,
				   s->held[i].count);
		free(s->held);
		*s = tmp;
	} else if (!server_insert(r, &tmp)) {
		ret = -ENOMEM;
		goto out;
	}
	*id = tmp.id;
	*epoch = tmp.epoch;
	log_info(1100060,
		 "I/O server %u (%s, %s) registered, %llu blocks%s", tmp.id, tmp.name, tmp.url,
		 (unsigned long long)capacity_blocks,
		 s ? "" : pristine ? ", new pristine volume" :
		 ", new volume of unknown content: each block is zeroed before its first use");
out:
	pthread_mutex_unlock(&r->mu);
	pthread_rwlock_unlock(&ms->blocks_rw);
	return ret;
}

uint64_t ms_server_epoch(struct ms *ms, uint32_t id)
{
	struct ms_ioserver *s;
	uint64_t e;

	pthread_mutex_lock(&ms->reg.mu);
	s = server_find_locked(&ms->reg, id);
	e = s ? s->epoch : 0;
	pthread_mutex_unlock(&ms->reg.mu);
	return e;
}

int registry_hold(struct ms_registry *r, uint32_t id, const struct ms_ext *e, size_t n)
{
	struct ms_ioserver *s;
	int ret = 0;

	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	if (!s) {
		ret = -ENOENT;
		goto out;
	}
	if (s->nheld + n > s->held_cap) {
		size_t cap = s->held_cap ? s->held_cap : 16;
		struct ms_ext *g;

		while (cap < s->nheld + n)
			cap *= 2;
		g = realloc(s->held, cap * sizeof(*g));
		if (!g) {
			ret = -ENOMEM;
			goto out;
		}
		s->held = g;
		s->held_cap = cap;
	}
	memcpy(s->held + s->nheld, e, n * sizeof(*e));
	s->nheld += n;
out:
	pthread_mutex_unlock(&r->mu);
	return ret;
}

int registry_copy_held(struct ms_registry *r, struct ms_ext **out, size_t *n)
{
	size_t total = 0, k = 0;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->n; i++)
		total += r->servers[i].nheld;
	if (total) {
		*out = malloc(total * sizeof(**out));
		if (!*out) {
			pthread_mutex_unlock(&r->mu);
			return -ENOMEM;
		}
		for (int i = 0; i < r->n; i++) {
			/* a server holding nothing may have no array at all */
			if (!r->servers[i].nheld)
				continue;
			memcpy(*out + k, r->servers[i].held,
			       r->servers[i].nheld * sizeof(**out));
			k += r->servers[i].nheld;
		}
	}
	pthread_mutex_unlock(&r->mu);
	*n = total;
	return 0;
}

uint64_t ms_blocks_held(struct ms *ms, uint32_t id)
{
	struct ms_ioserver *s;
	uint64_t n = 0;

	pthread_mutex_lock(&ms->reg.mu);
	s = server_find_locked(&ms->reg, id);
	for (size_t k = 0; s && k < s->nheld; k++)
		n += s->held[k].count;
	pthread_mutex_unlock(&ms->reg.mu);
	return n;
}

int ms_server_list(struct ms *ms, struct ms_server_info **out)
{
	struct ms_registry *r = &ms->reg;
	struct ms_server_info *a;
	int n;

	pthread_mutex_lock(&r->mu);
	n = r->n;
	a = calloc(n ? n : 1, sizeof(*a));
	if (!a) {
		pthread_mutex_unlock(&r->mu);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct ms_ioserver *s = &r->servers[i];

		a[i].id = s->id;
		snprintf(a[i].url, sizeof(a[i].url), "%s", s->url);
		snprintf(a[i].name, sizeof(a[i].name), "%s", s->name);
		snprintf(a[i].domain, sizeof(a[i].domain), "%s", s->domain);
		memcpy(a[i].uuid, s->uuid, s->uuid_len);
		a[i].uuid_len = s->uuid_len;
		a[i].up = s->up != NULL;
		a[i].draining = s->draining;
		a[i].read_only = s->read_only;
		snprintf(a[i].label, sizeof(a[i].label), "%s", s->label);
	}
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < n; i++)
		alloc_usage(&ms->alloc, a[i].id, &a[i].capacity_blocks, &a[i].free_blocks);
	*out = a;
	return n;
}

int ms_server_url(struct ms *ms, uint32_t id, char *buf, size_t len)
{
	struct ms_ioserver *s;
	int ret = -ENOENT;

	pthread_mutex_lock(&ms->reg.mu);
	s = server_find_locked(&ms->reg, id);
	if (s) {
		snprintf(buf, len, "%s", s->url);
		ret = 0;
	}
	pthread_mutex_unlock(&ms->reg.mu);
	return ret;
}

int ms_alloc_bitmap(struct ms *ms, uint32_t id, uint64_t **words, uint64_t *nblocks)
{
	return alloc_copy_bitmap(&ms->alloc, id, words, nblocks);
}

int ms_drain(struct ms *ms, struct ms_session *sess, uint32_t id, int on)
{
	struct ms_registry *r = &ms->reg;
	struct ms_ioserver *s;
	uint8_t k[5] = { MS_TAG_DRAIN, (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8),
			 (uint8_t)id };
	leveldb_writebatch_t *b;
	int ret;

	if (!ms_session_is_server(sess))
		return -EPERM;
	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	pthread_mutex_unlock(&r->mu);
	if (!s)
		return -ENOENT;
	b = leveldb_writebatch_create();
	if (on)
		leveldb_writebatch_put(b, (char *)k, sizeof(k), "", 0);
	else
		leveldb_writebatch_delete(b, (char *)k, sizeof(k));
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	if (ret)
		return ret;
	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	if (s && s->draining != on) {
		s->draining = on;
		log_info(1100061, "I/O server %u (%s): %s", id, s->url,
			 on ? "draining: its copies are moved to the other servers"
			    : "no longer draining");
	}
	pthread_mutex_unlock(&r->mu);
	return 0;
}

int ms_server_set(struct ms *ms, struct ms_session *sess, uint32_t id, const char *label,
		  int read_only)
{
	struct ms_registry *r = &ms->reg;
	struct ms_ioserver *s, tmp;
	uint8_t k[MS_KEY_MAX], v[SERVER_REC_MAX];
	leveldb_writebatch_t *b;
	int ret;

	if (!ms_session_is_server(sess))
		return -EPERM;
	if (label) {
		if (strlen(label) > MS_LABEL_MAX)
			return -EINVAL;
		for (const char *p = label; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return -EINVAL;
	}
	/* as a registration: the small synced write under the registry's mutex */
	pthread_mutex_lock(&r->mu);
	s = server_find_locked(r, id);
	if (!s) {
		ret = -ENOENT;
		goto out;
	}
	tmp = *s;
	if (label)
		snprintf(tmp.label, sizeof(tmp.label), "%s", label);
	if (read_only >= 0)
		tmp.read_only = read_only != 0;
	b = leveldb_writebatch_create();
	leveldb_writebatch_put(b, (char *)k, key_server(k, id), (char *)v, server_encode(&tmp, v));
	ret = ns_write_plain(ms, b);
	leveldb_writebatch_destroy(b);
	if (ret)
		goto out;
	if (s->read_only != tmp.read_only)
		log_info(1100062, "I/O server %u (%s): %s", id, s->url,
			 tmp.read_only ? "read-only: no new blocks go there"
				       : "no longer read-only");
	memcpy(s->label, tmp.label, sizeof(s->label));
	s->read_only = tmp.read_only;
out:
	pthread_mutex_unlock(&r->mu);
	return ret;
}
