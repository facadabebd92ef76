# SPDX-License-Identifier: MIT
# Shell functions for scripts that run in the test guest (POSIX sh; source it:
# `. tests/vm/guest/lib.sh`). Steps run under timeout(1) in their own process
# group, so a hung step is killed with everything it started and the run goes
# on; each step's verdict goes to a results file for the summary.
#
#   vm_step NAME SECONDS CMD [ARGS...]  run one step: exit 0 PASS, 77 SKIP, else FAIL
#   vm_summary                          print the verdicts; status 1 if any FAILed
#   vm_skip MESSAGE                     (in a check) say why and exit 77
#   vm_note MESSAGE                     print "NAME: MESSAGE" on the run's output
#   vm_build_dir                        the build dir the binaries come from
#   vm_bin_dir                          the programs' dir (RDFS_BIN or BUILD/bin)
#   vm_drop_caches                      drop the guest's page cache (FUSE included)
#   vm_has_option CMD... -- OPTION      CMD's --help mentions OPTION
#   vm_lc_dir NAME                      a fresh directory for a local cluster
#   vm_pytest_workers                   pytest options for RDFS_VM_PYTEST_WORKERS
#                                       (default 2) xdist workers, a file each
#
# Exit status 77 means "skipped" as in automake's test driver.

VM_RESULTS=${VM_RESULTS:-/run/rdfs-vm/results}
VM_STEP=${VM_STEP:-}
VM_REPO=${RDFS_REPO:-$PWD}

vm_note() {
	echo "${VM_STEP:-${0##*/}}: $*"
}

vm_skip() {
	vm_note "SKIP: $*"
	exit 77
}

vm_uptime() {
	read -r up _ </proc/uptime
	echo "$up"
}

vm_step() {
	name=$1
	limit=$2
	shift 2
	mkdir -p "${VM_RESULTS%/*}"
	echo "==== $name (limit ${limit} s): $*"
	t0=$(vm_uptime)
	VM_STEP=$name timeout -k 10 "$limit" "$@"
	rc=$?
	t1=$(vm_uptime)
	secs=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
	case $rc in
	0) verdict=PASS ;;
	77) verdict=SKIP ;;
	124 | 137) verdict=FAIL; rc="$rc, timed out after $limit s" ;;
	*) verdict=FAIL ;;
	esac
	echo "$verdict $name $secs $rc" >>"$VM_RESULTS"
	echo "---- $name: $verdict (${secs} s, exit $rc)"
	[ "$verdict" != FAIL ]
}

vm_summary() {
	echo "==== summary"
	failed=0
	while read -r verdict name secs rc; do
		printf 'RESULT %-4s %-28s %7s s\n' "$verdict" "$name" "$secs"
		[ "$verdict" = FAIL ] && failed=$((failed + 1))
	done <"$VM_RESULTS"
	[ "$failed" -eq 0 ]
}

vm_build_dir() {
	echo "${RDFS_BUILD:-$VM_REPO/build}"
}

vm_bin_dir() {
	echo "${RDFS_BIN:-$(vm_build_dir)/bin}"
}

vm_drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

vm_has_option() {
	cmd=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		cmd="$cmd $1"
		shift
	done
	[ "$1" = -- ] && shift
	$cmd --help 2>&1 | grep -q -e "$1"
}

vm_lc_dir() {
	dir=/run/rdfs-vm/$1
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "$dir"
}

# Two pytest-xdist workers, a test file each at a time, as the host's make
# test-integration: under TCG most of a test's time is a cluster starting or
# a timeout running out, not both vCPUs busy. Nothing when xdist is missing
# or RDFS_VM_PYTEST_WORKERS is 0 or 1 (one process, as before).
vm_pytest_workers() {
	n=${RDFS_VM_PYTEST_WORKERS:-2}
	[ "$n" -ge 2 ] 2>/dev/null || return 0
	python3 -c 'import xdist' 2>/dev/null || return 0
	echo "-n $n --dist loadfile"
}
