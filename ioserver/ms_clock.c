// SPDX-License-Identifier: MIT
/*
 * ms_clock.c - the metaserver's wall clock seen from an I/O server (see
 * ms_clock.h): an offset, atomic, learned at registration.
 */
#include <stdatomic.h>

#include "cap.h"
#include "ms_clock.h"

/* the metaserver's clock minus ours */
static _Atomic int64_t offset_ns;

void ms_clock_learn(int64_t sent_ns, int64_t ms_ns, int64_t recv_ns)
{
	atomic_store(&offset_ns, ms_ns - (sent_ns + (recv_ns - sent_ns) / 2));
}

int64_t ms_clock_now_ns(void)
{
	return cap_now_ns() + atomic_load(&offset_ns);
}

int64_t ms_clock_skew_ns(void)
{
	return -atomic_load(&offset_ns);
}
