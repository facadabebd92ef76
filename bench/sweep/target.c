// SPDX-License-Identifier: MIT
/*
 * target.c - the test file: write it through the client library, then learn
 * where it lives (its extents, the I/O server, the capabilities) with a LAYOUT
 * of our own, so the sweep can READ volume blocks straight from the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "rpc.h"
#include "sweep.h"

#define PREPARE_CHUNK	(4u << 20)

/* The file's name in the root directory (the sweep keeps its file there). */
static int target_name(const struct sweep_env *env, const char **name)
{
	const char *p = env->path;

	while (*p == '/')
		p++;
	if (!*p || strchr(p, '/')) {
		fprintf(stderr, "rdfs-sweep: --file must name a file in the root directory "
			"(e.g. /sweep.dat), not '%s'\n", env->path);
		return -EINVAL;
	}
	*name = p;
	return 0;
}

/* Say where the new file landed: a fragmented file cannot serve large requests. */
static int target_describe(struct sweep_env *env, uint64_t size, double seconds)
{
	struct sweep_target t;
	uint64_t largest = 0;
	size_t i;
	int ret = target_open(env, &t);

	if (ret)
		return ret;
	for (i = 0; i < t.nruns; i++)
		if (t.runs[i].length > largest)
			largest = t.runs[i].length;
	printf("prepared %s: %llu MiB in %.1f s on %s, %zu extent%s (largest %llu MiB)\n",
	       env->path, (unsigned long long)(size >> 20), seconds, t.server_url, t.nruns,
	       t.nruns == 1 ? "" : "s", (unsigned long long)(largest >> 20));
	target_free(&t);
	return 0;
}

int target_prepare(struct sweep_env *env, uint64_t size, uint64_t seed)
{
	struct rdfs_file *f = NULL;
	const char *name;
	struct stat st;
	uint64_t off;
	double t0;
	void *buf;
	int ret;

	ret = target_name(env, &name);
	if (ret)
		return ret;
	ret = rdfs_unlink(env->client, NULL, RDFS_ROOT_INO, name);
	if (ret && ret != -ENOENT) {
		fprintf(stderr, "rdfs-sweep: cannot remove the old %s: %s\n", env->path,
			strerror(-ret));
		return ret;
	}
	ret = rdfs_create(env->client, NULL, RDFS_ROOT_INO, name, 0644, O_RDWR | O_EXCL, &st, &f);
	if (ret) {
		fprintf(stderr, "rdfs-sweep: cannot create %s: %s\n", env->path, strerror(-ret));
		return ret;
	}
	if (posix_memalign(&buf, SWEEP_BLOCK, PREPARE_CHUNK)) {
		rdfs_release(f);
		return -ENOMEM;
	}
	t0 = now_seconds();
	for (off = 0; off < size; off += PREPARE_CHUNK) {
		size_t len = size - off < PREPARE_CHUNK ? size - off : PREPARE_CHUNK;
		ssize_t n;

		pattern_fill(buf, len, off, seed);
		n = rdfs_pwrite(f, buf, len, (off_t)off);
		if (n != (ssize_t)len) {
			ret = n < 0 ? (int)n : -EIO;
			fprintf(stderr, "rdfs-sweep: writing %s at %llu: %s\n", env->path,
				(unsigned long long)off, strerror(-ret));
			break;
		}
	}
	free(buf);
	if (!ret) {
		ret = rdfs_fsync(f, 0);
		if (ret)
			fprintf(stderr, "rdfs-sweep: fsync of %s: %s\n", env->path, strerror(-ret));
	}
	if (rdfs_release(f) && !ret)
		ret = -EIO;
	if (!ret)
		ret = target_describe(env, size, now_seconds() - t0);
	return ret;
}

static const Rdfs__Capability *reply_cap(const Rdfs__LayoutReply *r, uint32_t server_id)
{
	size_t i;

	for (i = 0; i < r->n_caps; i++)
		if (r->caps[i]->server_id == server_id)
			return r->caps[i];
	return NULL;
}

static int target_add_reply(struct sweep_target *t, Rdfs__LayoutReply *rep)
{
	Rdfs__LayoutReply **rs;
	struct sweep_run *runs;
	size_t i;

	rs = realloc(t->replies, (t->nreplies + 1) * sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	t->replies = rs;
	t->replies[t->nreplies++] = rep;
	runs = realloc(t->runs, (t->nruns + rep->n_extents) * sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	t->runs = runs;
	for (i = 0; i < rep->n_extents; i++) {
		const Rdfs__Extent *e = rep->extents[i];
		struct sweep_run *r = &t->runs[t->nruns];

		if (e->unwritten) {
			fprintf(stderr, "rdfs-sweep: %llu bytes at %llu are not committed as "
				"written; run prepare again\n", (unsigned long long)e->length,
				(unsigned long long)e->file_offset);
			return -EIO;
		}
		if (t->nruns == 0 && t->nreplies == 1)
			t->server_id = e->server_id;
		if (e->server_id != t->server_id) {
			fprintf(stderr, "rdfs-sweep: the file lives on more than one I/O server "
				"(%u and %u); the sweep needs a cluster with one\n",
				t->server_id, e->server_id);
			return -EINVAL;
		}
		r->file_offset = e->file_offset;
		r->length = e->length;
		r->block = e->block;
		r->cap = reply_cap(rep, e->server_id);
		if (!r->cap) {
			fprintf(stderr, "rdfs-sweep: the metaserver sent no capability for "
				"server %u\n", e->server_id);
			return -EPROTO;
		}
		t->nruns++;
	}
	for (i = 0; i < rep->n_servers; i++)
		if (rep->servers[i]->server_id == t->server_id && rep->servers[i]->url)
			snprintf(t->server_url, sizeof(t->server_url), "%s", rep->servers[i]->url);
	return 0;
}

int target_open(struct sweep_env *env, struct sweep_target *t)
{
	Rdfs__LayoutReq req = RDFS__LAYOUT_REQ__INIT;
	Rdfs__Cred cred = RDFS__CRED__INIT;
	struct rpc_client *ms = NULL;
	const char *name;
	struct stat st;
	uint64_t pos = 0;
	int ret;

	memset(t, 0, sizeof(*t));
	ret = target_name(env, &name);
	if (ret)
		return ret;
	ret = rdfs_lookup(env->client, NULL, RDFS_ROOT_INO, name, &st);
	if (ret) {
		fprintf(stderr, "rdfs-sweep: %s: %s%s\n", env->path, strerror(-ret),
			ret == -ENOENT ? " (run `rdfs-sweep prepare` first)" : "");
		return ret;
	}
	t->size = (uint64_t)st.st_size;
	/* our own connection: the client library keeps capabilities to itself */
	ret = rpc_client_connect(env->metaserver, &env->secret, "tool", env->timeout_ms, &ms);
	if (ret) {
		fprintf(stderr, "rdfs-sweep: cannot connect to %s: %s\n", env->metaserver,
			strerror(-ret));
		return ret;
	}
	req.cred = &cred;		/* root */
	req.ino = st.st_ino;
	while (pos < t->size && !ret) {
		Rdfs__LayoutReply *rep = NULL;

		req.offset = pos;
		req.length = t->size - pos;
		ret = rpc_call(ms, RDFS_OP_LAYOUT, &req.base, &rdfs__layout_reply__descriptor,
			       (ProtobufCMessage **)&rep, env->timeout_ms);
		if (ret) {
			fprintf(stderr, "rdfs-sweep: LAYOUT of %s: %s\n", env->path, strerror(-ret));
			break;
		}
		if (rep->offset + rep->length <= pos) {
			protobuf_c_message_free_unpacked(&rep->base, NULL);
			ret = -EPROTO;
			break;
		}
		pos = rep->offset + rep->length;
		ret = target_add_reply(t, rep);
	}
	rpc_client_close(ms);
	if (!ret && (t->nruns == 0 || !t->server_url[0])) {
		fprintf(stderr, "rdfs-sweep: %s has no data on any I/O server (run prepare)\n",
			env->path);
		ret = -ENODATA;
	}
	if (ret)
		target_free(t);
	return ret;
}

void target_free(struct sweep_target *t)
{
	size_t i;

	for (i = 0; i < t->nreplies; i++)
		protobuf_c_message_free_unpacked(&t->replies[i]->base, NULL);
	free(t->replies);
	free(t->runs);
	memset(t, 0, sizeof(*t));
}

void target_drop_volume_cache(const struct sweep_env *env)
{
	int fd;

	if (!env->volume)
		return;
	fd = open(env->volume, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* only clean pages can go: write the dirty ones first */
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}
