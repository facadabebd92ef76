// SPDX-License-Identifier: MIT
/*
 * io_job.c - a job's life (see enum job_state in io_internal.h): its state
 * transitions, its first step on its ring (decode, registration, capability
 * and bounds checks), its replies, its range lock and its end.
 *
 * Threads: job_step() runs on the job's ring thread for every posting, and
 * reads from the state what the posting means; job_claim_state() and
 * job_state() may be called from any thread, everything else only by the
 * job's owner (io_internal.h).
 *
 * Locks: READs take their blocks' range lock shared, WRITE and ZERO
 * exclusive, all through range_lock_acquire_async() so a ring thread never
 * blocks on another request; lock order is arrival order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cap.h"
#include "fence.h"
#include "io_internal.h"
#include "log.h"
#include "ms_clock.h"
#include "server_id.h"
#include "volume.h"
#include "xport.h"

#define TO(s)	(1u << (s))

/* The transitions of enum job_state's table, and no other. */
static const unsigned int job_next[JOB_NSTATES] = {
	[JOB_NEW] = TO(JOB_COMMIT_WAIT) | TO(JOB_LOCK_WAIT) | TO(JOB_READING) |
		    TO(JOB_WRITE_MERGE) | TO(JOB_WRITING) | TO(JOB_COMMIT_SYNC) | TO(JOB_DONE),
	[JOB_COMMIT_WAIT] = TO(JOB_COMMIT_SYNC),
	[JOB_LOCK_WAIT] = TO(JOB_READING) | TO(JOB_WRITE_MERGE) | TO(JOB_WRITING) | TO(JOB_DONE),
	[JOB_READING] = TO(JOB_READ_WAIT_BUF) | TO(JOB_READ_WAIT_RA) | TO(JOB_READ_WAIT_SEND) |
			TO(JOB_DONE),
	[JOB_READ_WAIT_BUF] = TO(JOB_READING),
	[JOB_READ_WAIT_RA] = TO(JOB_READING) | TO(JOB_DONE),
	[JOB_READ_WAIT_SEND] = TO(JOB_READING),
	[JOB_WRITE_MERGE] = TO(JOB_WRITING),
	[JOB_WRITING] = TO(JOB_DONE),
	[JOB_COMMIT_SYNC] = TO(JOB_DONE),
	[JOB_DONE] = 0,
};

static const char *const job_state_name[JOB_NSTATES] = {
	[JOB_NEW] = "NEW",
	[JOB_COMMIT_WAIT] = "COMMIT_WAIT",
	[JOB_LOCK_WAIT] = "LOCK_WAIT",
	[JOB_READING] = "READING",
	[JOB_READ_WAIT_BUF] = "READ_WAIT_BUF",
	[JOB_READ_WAIT_RA] = "READ_WAIT_RA",
	[JOB_READ_WAIT_SEND] = "READ_WAIT_SEND",
	[JOB_WRITE_MERGE] = "WRITE_MERGE",
	[JOB_WRITING] = "WRITING",
	[JOB_COMMIT_SYNC] = "COMMIT_SYNC",
	[JOB_DONE] = "DONE",
};

static const char *job_state_str(enum job_state s)
{
	return (unsigned int)s < JOB_NSTATES ? job_state_name[s] : "?";
}

/* A job where its life cannot take it: carrying on would corrupt other requests' data. */
static _Noreturn void job_state_bug(const struct io_job *j, enum job_state from,
				    enum job_state to)
{
	log_error(1200004, "I/O job for op %u: bad state transition %s -> %s", j->op,
		  job_state_str(from), job_state_str(to));
	abort();
}

static bool job_may_go(enum job_state from, enum job_state to)
{
	return (unsigned int)from < JOB_NSTATES && (unsigned int)to < JOB_NSTATES &&
	       (job_next[from] & TO(to));
}

/* The owner moves @j on; JOB_READ_WAIT_SEND, which another thread may claim, is not its alone. */
void job_set_state(struct io_job *j, enum job_state to)
{
	enum job_state from = atomic_load(&j->state);

	if (from == JOB_READ_WAIT_SEND || !job_may_go(from, to) ||
	    !atomic_compare_exchange_strong(&j->state, &from, to))
		job_state_bug(j, from, to);
}

/* From any thread: move @j from @from to @to if it is still in @from; true if this call did. */
bool job_claim_state(struct io_job *j, enum job_state from, enum job_state to)
{
	if (!job_may_go(from, to))
		job_state_bug(j, from, to);
	return atomic_compare_exchange_strong(&j->state, &from, to);
}

void job_put(struct io_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->io)
		rdfs__io_req__free_unpacked(j->io, NULL);
	xport_conn_put(j->conn);
	free(j->units);
	free(j->bounce);
	free(j);
}

/* The final reply is posted: the request is answered; the job may outlive it (sends). */
void job_finish(struct io_job *j)
{
	struct io_pool *p = j->pool;

	if (j->locked) {
		range_lock_release(volume_range_lock(p->vol), &j->lock);
		j->locked = false;
	}
	if (j->epoch) {
		epoch_end(p, j->epoch);
		j->epoch = NULL;
	}
	rpc_request_done(&j->req);
	job_set_state(j, JOB_DONE);
	atomic_fetch_sub(&p->busy, 1);
	job_put(j);	/* the ring's hold */
}

static const char *rights_name(uint32_t rights)
{
	return rights == RDFS_CAP_WRITE ? "write" : "read";
}

/*
 * 0 if @cap lets this server's clients do @rights on the blocks; else replies the
 * error itself and returns it.
 */
static int io_check_cap(struct io_pool *p, struct rpc_request *req, const Rdfs__IoReq *io,
			uint32_t server_id, uint32_t rights)
{
	const char *why;
	int ret;

	if (!io->cap) {
		rpc_server_reply_error(req, -EACCES, "no capability");
		return -EACCES;
	}
	/* a server (another I/O server's COPY) acts for the client it checked holds it */
	ret = cap_check(p->cap_key, io->cap, server_id,
			!req->peer ? NULL : req->peer->cls == AUTH_CLASS_SERVER ? io->cap->holder :
			req->peer->id, rights, io->first_block, io->block_count, ms_clock_now_ns());
	/* genuine, but perhaps taken back since: the client fetches the layout again */
	if (ret == 0 && p->fences &&
	    (ret = fence_check(p->fences, io->cap->epoch, io->cap->ino, io->cap->gen,
			       ms_clock_now_ns()))) {
		rpc_server_reply_error(req, ret, fence_why(ret));
		return ret;
	}
	switch (ret) {
	case 0:
		return 0;
	case -EBADMSG:
		log_warn(1200005, "%s: ino=%llu tag=%u: forged capability for %s of blocks %llu+%u",
			 xport_conn_peer(req->conn), (unsigned long long)io->cap->ino,
			 req->msg->hdr.tag, rights_name(rights),
			 (unsigned long long)io->first_block, io->block_count);
		rpc_server_reply_error(req, -EACCES, "forged capability");
		return -EACCES;
	case -EKEYEXPIRED:
		rpc_server_reply_error(req, -EKEYEXPIRED, "capability expired");
		return ret;
	case -EACCES:
		if (io->cap->server_id != server_id)
			why = "capability is for another I/O server";
		else if (!req->peer || !io->cap->holder || strcmp(io->cap->holder, req->peer->id))
			why = "capability was granted to another peer";
		else if ((io->cap->rights & rights) != rights)
			why = rights == RDFS_CAP_WRITE ? "capability does not grant write"
						       : "capability does not grant read";
		else
			why = "capability does not cover the requested blocks";
		rpc_server_reply_error(req, -EACCES, why);
		return ret;
	default:
		rpc_server_reply_error(req, ret, "cannot check capability");
		return ret;
	}
}

static int io_check_bounds(struct io_pool *p, struct rpc_request *req, const Rdfs__IoReq *io)
{
	int ret = volume_check_io(p->vol, io->first_block, io->block_count, io->head,
				  io->length, RDFS_MAX_DATA);

	if (ret == -ERANGE)
		rpc_server_reply_error(req, ret, "blocks past the end of the volume");
	else if (ret)
		rpc_server_reply_error(req, ret,
				       "bad range: head must be < 4096, head + length within the blocks, length <= 16 MiB");
	return ret;
}

static int io_check_zero_bounds(struct io_pool *p, struct rpc_request *req,
				const Rdfs__IoReq *io)
{
	int ret = volume_check_io(p->vol, io->first_block, io->block_count, 0, 0, 0);

	if (ret == -ERANGE)
		rpc_server_reply_error(req, ret, "blocks past the end of the volume");
	else if (ret)
		rpc_server_reply_error(req, ret, "bad range: ZERO needs at least one block");
	return ret;
}

void io_reply_length(struct io_pool *p, struct rpc_request *req, uint32_t length)
{
	Rdfs__IoReply reply = RDFS__IO_REPLY__INIT;

	reply.length = length;
	reply.verifier = atomic_load(&p->verifier);
	rpc_server_reply(req, 0, &reply.base, NULL, 0);
}

/*
 * Under the job's range lock: was its capability fenced since it was checked?
 * The fence's reply leaves before the metaserver frees the blocks, and a new
 * owner's ZERO or WRITE of them queues behind this lock: so a job that holds
 * the lock unfenced is done with the blocks before they change hands, and one
 * that takes it later sees the fence here. Replies -ESTALE (or -ENOLINK: the
 * registration's lease lapsed; never called for a job that has answered already).
 */
bool job_fenced(struct io_job *j)
{
	const Rdfs__Capability *cap = j->io->cap;
	int ret;

	if (!j->pool->fences ||
	    !(ret = fence_check(j->pool->fences, cap->epoch, cap->ino, cap->gen, ms_clock_now_ns())))
		return false;
	rpc_server_reply_error(&j->req, ret, fence_why(ret));
	return true;
}

/* Range lock granted to a waiting job, on whichever thread released it. */
static void lock_granted(void *arg)
{
	struct io_job *j = arg;

	ring_post(j->ring, j);	/* the reference taken when it started waiting */
}

/*
 * Take the job's blocks: true when held now, else the job waits in
 * JOB_LOCK_WAIT and job_step() goes on once they are granted. Either way the
 * job is in line for them from here on.
 */
bool job_lock_blocks(struct io_job *j, uint64_t count, bool shared)
{
	j->locked = true;
	atomic_fetch_add(&j->refs, 1);
	if (!range_lock_acquire_async(volume_range_lock(j->pool->vol), &j->lock,
				      j->io->first_block, j->io->first_block + count, shared,
				      lock_granted, j)) {
		/* the grant only posts the job: this ring steps it after this step */
		job_set_state(j, JOB_LOCK_WAIT);
		return false;
	}
	atomic_fetch_sub(&j->refs, 1);
	return true;
}

/* First step of a job on its ring: decode and check, then start its operation. */
static void job_begin(struct io_job *j)
{
	struct io_pool *p = j->pool;
	uint32_t rights = j->op == RDFS_OP_READ ? RDFS_CAP_READ : RDFS_CAP_WRITE;
	uint32_t server_id;

	if (j->op == RDFS_OP_IO_COMMIT) {
		commit_start(j);
		return;
	}
	j->io = rdfs__io_req__unpack(NULL, j->req.msg->hdr.body_len, j->req.msg->body);
	if (!j->io) {
		rpc_server_reply_error(&j->req, -EBADMSG, "undecodable IoReq");
		job_finish(j);
		return;
	}
	if (server_id_get(p->id, &server_id)) {
		rpc_server_reply_error(&j->req, -EAGAIN, "not registered yet");
		job_finish(j);
		return;
	}
	if (io_check_cap(p, &j->req, j->io, server_id, rights)) {
		job_finish(j);
		return;
	}
	if (j->op == RDFS_OP_ZERO) {
		/* whole blocks: head and length do not apply */
		if (io_check_zero_bounds(p, &j->req, j->io))
			job_finish(j);
		else
			zero_start(j);
		return;
	}
	if (io_check_bounds(p, &j->req, j->io)) {
		job_finish(j);
		return;
	}
	if (j->op == RDFS_OP_WRITE)
		write_start(j);
	else
		read_start(j);
}

/*
 * A posting of @j runs on its ring. Who posts, and so what the posting means,
 * follows from the state; a READ may also see a late wake-up for a wait it
 * has left already, which must find nothing to do or the next step.
 */
void job_step(struct io_job *j)
{
	enum job_state s = job_state(j);

	switch (s) {
	case JOB_NEW:			/* io_pool_submit() */
	case JOB_COMMIT_WAIT:		/* the last WRITE before it (epoch_end()) */
		job_begin(j);
		return;
	case JOB_LOCK_WAIT:		/* lock_granted() */
		if (j->op == RDFS_OP_ZERO)
			zero_locked(j);
		else if (j->op == RDFS_OP_WRITE)
			write_locked(j);
		else
			read_locked(j);
		return;
	case JOB_READ_WAIT_SEND:
		/*
		 * A late wake-up, as the send completion that ends this wait
		 * moves the job to JOB_READING itself: read on either way.
		 */
		job_claim_state(j, JOB_READ_WAIT_SEND, JOB_READING);
		read_step(j);
		return;
	case JOB_READING:		/* a send completion or a read-ahead load, late or not */
	case JOB_READ_WAIT_RA:		/* unit_seg_loaded(), or late */
		read_step(j);
		return;
	case JOB_READ_WAIT_BUF:		/* late: only the ring's buffer-wait list ends it */
	case JOB_DONE:			/* late: nothing is left to do */
		return;
	case JOB_WRITE_MERGE:
	case JOB_WRITING:
	case JOB_COMMIT_SYNC:
	case JOB_NSTATES:
		break;			/* moved on by their ring completions alone */
	}
	log_error(1200006, "I/O job for op %u: posted in state %s", j->op, job_state_str(s));
	abort();
}
