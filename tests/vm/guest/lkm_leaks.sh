# SPDX-License-Identifier: MIT
# Sourced by the kernel-client guest steps (tests/vm/suite.d/lkm-*) after their
# tests, with $rc (the tests' status), $taint_before and kernel_log() set:
# nothing mounted, every module object counter back at zero, no data
# connection or request alive (their receivers are module code), rmmod works, and
# the kernel said nothing of leaks, oopses or warnings. Exits the step.
failures=0
if grep -q ' rdfs ' /proc/mounts; then
	vm_note "FAIL: kernel mounts left after the tests:"
	grep ' rdfs ' /proc/mounts
	failures=$((failures + 1))
fi
objs=/sys/module/rdfs/parameters/objects
# helpers exit shortly after umount: a bounded wait for the counters
i=0
while grep -q '=[1-9-]' "$objs" && [ $i -lt 50 ]; do
	sleep 0.2
	i=$((i + 1))
done
vm_note "module objects with no mount: $(cat "$objs")"
if grep -q '=[1-9-]' "$objs"; then
	vm_note "FAIL: objects still held with every mount gone"
	failures=$((failures + 1))
fi
stats=/sys/module/rdfs/parameters/stats
alive=$(awk '$1 ~ /^(tcp|rdma)_(conns|reqs)$/ && $2 != 0 { printf "%s=%s ", $1, $2 }' "$stats")
if [ -n "$alive" ]; then
	vm_note "FAIL: data connections or requests alive with every mount gone: $alive"
	failures=$((failures + 1))
fi
# kmem_cache_destroy() at rmmod names every rdfs inode still allocated
if [ -n "$alive" ]; then
	vm_note "FAIL: rmmod not tried (a connection's receiver would run freed code)"
elif rmmod rdfs; then
	vm_note "ok: rmmod"
else
	vm_note "FAIL: rmmod rdfs"
	failures=$((failures + 1))
fi
if kernel_log | grep -E 'rdfs.*(leaked|still has objects)|BUG|WARNING|Oops'; then
	vm_note "FAIL: the kernel reported the lines above"
	failures=$((failures + 1))
fi
read -r taint_after </proc/sys/kernel/tainted
if [ $(((taint_after & ~taint_before) & (128 | 512 | 16384 | 32))) -ne 0 ]; then
	kernel_log | tail -n 40
	vm_note "FAIL: kernel tainted ($taint_before -> $taint_after)"
	failures=$((failures + 1))
fi
[ $rc -eq 0 ] && [ $failures -eq 0 ] || exit 1
vm_note "all passed; no leaks"
