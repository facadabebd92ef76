# rdfs - one Makefile for the whole tree. See README.md.
#
#   make            build everything into build/
#   make test       install dependencies, build, run unit + integration tests
#   make demo       install dependencies, build, run a local cluster + workload
#   make install    install programs, mount helpers, config template, systemd units
#                   and, if built (make lkm), the kernel module (PREFIX, DESTDIR,
#                   UNITDIR; make install-lkm)
#   make deb        Debian packages into build/deb/ (debhelper), checked by lintian
#   make test-vm    the qemu guest suite alone (RDMA over Soft-RoCE, kernel client)
#   make test-vm-deb  make deb, then the packages installed and run in the guest
#   make bench      side-by-side comparison (bench/compare; FULL=1 for the long matrix)
#   make bench-sweep  request-size sweep against one I/O server (QUICK=1: short)
#   make bench-vm   RDMA benchmarks inside the qemu guest
#   make soak       the random file-operation tester, long (tests/fsx; FSX_OPS=200000)
#   make test-sanitize  the unit tests built with AddressSanitizer (leaks included) and
#                   UndefinedBehaviorSanitizer into $(BUILD)-san; any report fails

BUILD   ?= build
PREFIX  ?= /usr/local
# Where `make install` puts the servers' systemd units (packages: /lib/systemd/system).
UNITDIR ?= /etc/systemd/system
CC      ?= gcc
CXX     ?= g++

PKGS     := libprotobuf-c fuse3 liburing openssl inih libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lleveldb -lpthread -lrdmacm -libverbs

# rdfs metrics fetches over HTTP; only the tool links libcurl.
TOOL_LIBS  := $(shell pkg-config --libs libcurl 2>/dev/null)
# netdelay (the delay of deploy/netns-cluster where the kernel has no netem).
NFQ_LIBS   := $(shell pkg-config --libs libnetfilter_queue 2>/dev/null || echo -lnetfilter_queue)

WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# CFLAGS/CXXFLAGS are the user's (optimisation, sanitizers); what the code
# needs to compile at all is kept apart so `make CFLAGS=...` cannot drop it.
CFLAGS   ?= -O2 -g
# C++ is only the googletest drivers: unoptimized, they build in half the time
# (a third under the sanitizers) and the code they test keeps its own flags.
CXXFLAGS ?= -O0 -g
RDFS_CFLAGS   := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(WARN) -fno-strict-aliasing
RDFS_CXXFLAGS := -std=c++17 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Wall -Wno-unused-parameter
CPPFLAGS += -Ilib -Ilib/client -Iwire -I$(BUILD)/gen $(PKG_CFLAGS)

GEN      := $(BUILD)/gen
PROTO    := proto/rdfs.proto
PB_C     := $(GEN)/rdfs.pb-c.c
PB_H     := $(GEN)/rdfs.pb-c.h

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB_SRCS    := $(wildcard lib/*.c)
CLIENT_SRCS := $(wildcard lib/client/*.c)
MS_SRCS     := $(filter-out metaserver/main.c,$(wildcard metaserver/*.c))
IOS_SRCS    := $(filter-out ioserver/main.c,$(wildcard ioserver/*.c))
FUSE_SRCS   := $(wildcard client-fuse/*.c)
TOOL_SRCS   := $(wildcard tools/rdfs/*.c)
# bench/ior: rdfs-bench (IOR/mdtest); its main.c apart so unit tests link the rest.
BENCH_SRCS  := $(filter-out bench/ior/main.c,$(wildcard bench/ior/*.c))
SWEEP_SRCS  := $(wildcard bench/sweep/*.c)

LIBRDFS   := $(BUILD)/lib/librdfs.a
LIBCLIENT := $(BUILD)/lib/librdfs-client.a
LIBMS     := $(BUILD)/lib/libmetaserver.a
LIBIOS    := $(BUILD)/lib/libioserver.a
LIBBENCH  := $(BUILD)/lib/libbench.a

HELPER_SRCS := $(wildcard client-lkm/helper/*.c)

BINS := $(BUILD)/bin/rdfs-metaserver $(BUILD)/bin/rdfs-ioserver $(BUILD)/bin/rdfs-fuse \
        $(BUILD)/bin/rdfs $(BUILD)/bin/rdfs-bench \
        $(if $(SWEEP_SRCS),$(BUILD)/bin/rdfs-sweep) \
        $(BUILD)/bin/rdfs-lkm-helper

.PHONY: all man deb deps test test-unit test-integration test-integration-tls test-vm test-vm-deb demo install clean \
        bench bench-sweep bench-meta-scale bench-vm lkm install-lkm soak test-sanitize fuzz fuzz-build \
        test-fuzz test-integration-san test-tsan check-format check-log-ids check-lkm
# Test tools: built for the tests and benches, never installed.
TEST_TOOLS := $(BUILD)/bin/netdelay
all: $(BINS) $(BUILD)/bin/mount.fuse.rdfs $(TEST_TOOLS)

$(PB_C) $(PB_H) &: $(PROTO)
	@mkdir -p $(GEN)
	protoc-c --c_out=$(GEN) --proto_path=proto $(PROTO)

ALL_C := $(LIB_SRCS) $(CLIENT_SRCS) $(MS_SRCS) $(IOS_SRCS) $(FUSE_SRCS) $(TOOL_SRCS) \
         metaserver/main.c ioserver/main.c $(wildcard bench/ior/*.c) $(SWEEP_SRCS) \
         $(HELPER_SRCS)
$(call obj,$(ALL_C)): $(PB_H)
# The kernel client's helper also sees the module's device ABI.
$(call obj,$(HELPER_SRCS)): CPPFLAGS += -Iclient-lkm

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(RDFS_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/rdfs.pb-c.o: $(PB_C)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(RDFS_CFLAGS) $(CFLAGS) -w -c $< -o $@

$(LIBRDFS): $(call obj,$(LIB_SRCS)) $(BUILD)/obj/gen/rdfs.pb-c.o
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBCLIENT): $(call obj,$(CLIENT_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBMS): $(call obj,$(MS_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBIOS): $(call obj,$(IOS_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBBENCH): $(call obj,$(BENCH_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/rdfs-metaserver: $(call obj,metaserver/main.c) $(LIBMS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/bin/rdfs-ioserver: $(call obj,ioserver/main.c) $(LIBIOS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/bin/rdfs-fuse: $(call obj,$(FUSE_SRCS)) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/bin/rdfs: $(call obj,$(TOOL_SRCS)) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(TOOL_LIBS)
$(BUILD)/bin/rdfs-bench: $(call obj,$(wildcard bench/ior/main.c)) $(LIBBENCH) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm
$(BUILD)/bin/rdfs-sweep: $(call obj,$(SWEEP_SRCS)) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm
# The kernel client's user-space helper (also built by `make lkm` into build/lkm,
# beside the module): needs no kernel headers, so packages build it here.
$(BUILD)/bin/rdfs-lkm-helper: $(call obj,$(HELPER_SRCS)) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)
$(BUILD)/bin/netdelay: $(call obj,tools/netdelay/netdelay.c)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(NFQ_LIBS)
$(BUILD)/bin/mount.fuse.rdfs: deploy/mount.fuse.rdfs
	@mkdir -p $(dir $@)
	install -m 0755 $< $@

# ---------------------------------------------------------------- manual pages
# Made from each program's --help (laid out as a manual page already) by
# deploy/help2roff; `make install` installs them.
VERSION  := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog 2>/dev/null)
MAN1     := rdfs-fuse rdfs rdfs-bench
MAN8     := rdfs-metaserver rdfs-ioserver rdfs-lkm-helper mount.fuse.rdfs
# One page per command of the rdfs tool, rdfs-COMMAND(1), from `rdfs help COMMAND`;
# the commands are the .name of each tools/rdfs/cmd_*.c.
RDFS_CMDS := $(shell sed -n 's/^[[:space:]]*\.name = "\([a-z]*\)",$$/\1/p' \
               $(sort $(wildcard tools/rdfs/cmd_*.c)))
RDFS_CMD_MANS := $(patsubst %,$(BUILD)/man/rdfs-%.1,$(RDFS_CMDS))
MANPAGES := $(patsubst %,$(BUILD)/man/%.1,$(MAN1)) $(patsubst %,$(BUILD)/man/%.8,$(MAN8)) \
            $(BUILD)/man/mount.rdfs.8 $(RDFS_CMD_MANS)
HELP2ROFF = deploy/help2roff --source "rdfs $(VERSION)" \
	$(if $(filter mount.fuse.rdfs,$*),--summary "mount(8) helper for rdfs over FUSE")
man: $(MANPAGES)
$(BUILD)/man/%.1: $(BUILD)/bin/% deploy/help2roff
	@mkdir -p $(dir $@)
	$(HELP2ROFF) --section 1 $< > $@.tmp && mv $@.tmp $@
# (a static pattern: rdfs-fuse.1 and rdfs-bench.1 are programs' pages)
$(RDFS_CMD_MANS): $(BUILD)/man/rdfs-%.1: $(BUILD)/bin/rdfs deploy/help2roff
	@mkdir -p $(dir $@)
	$(HELP2ROFF) --section 1 --name rdfs-$* --help-args "help $*" $< > $@.tmp && mv $@.tmp $@
$(BUILD)/man/%.8: $(BUILD)/bin/% deploy/help2roff
	@mkdir -p $(dir $@)
	$(HELP2ROFF) --section 8 $< > $@.tmp && mv $@.tmp $@
# mount.rdfs runs rdfs-lkm-helper, whose page covers both.
$(BUILD)/man/mount.rdfs.8:
	@mkdir -p $(dir $@)
	echo '.so man8/rdfs-lkm-helper.8' > $@

# ---------------------------------------------------------------- unit tests
# One googletest binary per part, so each links only the part it tests.
GTEST_LIBS := -lgtest -lgtest_main -lpthread
UNIT_BINS := $(BUILD)/tests/test_lib $(BUILD)/tests/test_metaserver \
             $(BUILD)/tests/test_ioserver $(BUILD)/tests/test_client \
             $(if $(wildcard tests/unit/bench_*.cc),$(BUILD)/tests/test_bench)

# googletest's headers, precompiled once per build directory (with that
# build's flags, which a .gch must match) and used by every test object.
UNIT_PCH := $(BUILD)/pch/unit.h
$(UNIT_PCH): tests/unit/pch.h
	@mkdir -p $(dir $@)
	cp $< $@
$(UNIT_PCH).gch: $(UNIT_PCH)
	$(CXX) $(CPPFLAGS) $(RDFS_CXXFLAGS) $(CXXFLAGS) -x c++-header $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.cc $(PB_H) $(UNIT_PCH).gch
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(RDFS_CXXFLAGS) $(CXXFLAGS) -Winvalid-pch -include $(UNIT_PCH) \
		-MMD -MP -c $< -o $@

tobj = $(patsubst tests/%.cc,$(BUILD)/obj/tests/%.o,$(wildcard tests/unit/$(1)_*.cc))

$(BUILD)/tests/test_lib: $(call tobj,lib) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GTEST_LIBS)
$(BUILD)/tests/test_metaserver: $(call tobj,ms) $(LIBMS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GTEST_LIBS)
$(BUILD)/tests/test_ioserver: $(call tobj,ios) $(LIBIOS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GTEST_LIBS)
$(BUILD)/tests/test_client: $(call tobj,client) $(LIBCLIENT) $(LIBMS) $(LIBIOS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GTEST_LIBS)

$(BUILD)/tests/test_bench: $(call tobj,bench) $(LIBBENCH) $(LIBCLIENT) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(GTEST_LIBS) -lm

deps:
	@deploy/install-deps

# Builds inside make test use every CPU (JOBS).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# The guest suite runs last: host suites fail faster and explain more.
test: deps
	@deploy/install-deps --vm
	$(MAKE) -j$(JOBS) all $(UNIT_BINS)
	$(MAKE) test-unit
	$(MAKE) test-sanitize
	$(MAKE) test-tsan
	$(MAKE) check-format
	$(MAKE) check-log-ids
	$(MAKE) test-fuzz
	$(MAKE) test-integration
	$(MAKE) test-integration-tls
	$(MAKE) test-integration-san
	$(MAKE) lkm
	$(MAKE) check-lkm
	$(MAKE) deb
	$(MAKE) test-vm DEB_BUILT=1

# DEB_BUILT=1: the suite's last step installs the packages of an earlier make
# deb (make test's) and runs them (tests/vm/guest/checks/deb-install), all but
# rdfs-dkms, whose compile under TCG (about 205 s) would take make test past 45
# minutes on a slow day; make test-vm-deb (or RDFS_DEB_DKMS=1) runs it.
test-vm: all $(BUILD)/tests/test_lib $(BUILD)/tests/test_client
	@deploy/install-deps --vm $(if $(DEB_BUILT),--deb)
	RDFS_BUILD=$(BUILD) $(if $(DEB_BUILT),RDFS_DEB_DIR=$(abspath $(DEB_DIR))) tests/vm/run-suite

# The packages of make deb installed into the guest with dpkg and run from
# there (tests/vm/guest/checks/deb-install), alone in a boot of their own and
# with rdfs-dkms: dkms builds the module in the guest, a kernel mount uses it.
# DEB_BUILT=1: the packages of an earlier make deb.
test-vm-deb: $(if $(DEB_BUILT),,deb)
	@deploy/install-deps --vm --deb
	tests/vm/run --timeout 1500 --env RDFS_DEB_DIR=$(abspath $(DEB_DIR)) \
		tests/vm/guest/checks/deb-install

bench-sweep: deps
	$(MAKE) -j$(JOBS) all
	RDFS_BIN=$(BUILD)/bin bench/sweep/run $(if $(QUICK),--quick)

bench: deps
	@deploy/install-deps --bench
	$(MAKE) -j$(JOBS) all
	bench/compare $(if $(FULL),--full)

# Metadata rates at 10k and 1M files in one directory (about half an hour).
bench-meta-scale: deps
	$(MAKE) -j$(JOBS) all
	RDFS_BIN=$(BUILD)/bin bench/meta-scale $(if $(COUNTS),--counts $(COUNTS))

# The kernel client, against KVER's headers (default: the guest kernel of tests/vm).
lkm: all
	client-lkm/build $(if $(KVER),--kver $(KVER)) --out $(BUILD)/lkm

bench-vm: deps
	@deploy/install-deps --vm
	$(MAKE) -j$(JOBS) all
	$(MAKE) lkm
	RDFS_BUILD=$(BUILD) tests/vm/bench

# The binaries side by side, test_client in two shards (tests/unit/run-parallel):
# it mostly waits out timeouts and fences.
test-unit: $(UNIT_BINS)
	tests/unit/run-parallel --split $(BUILD)/tests/test_client:2 $(UNIT_BINS)

# Two pytest-xdist workers, a test file each at a time (its module fixtures stay
# whole): most tests wait on timeouts, fences and round trips rather than on a
# CPU, so the suite takes about half as long. IT_WORKERS=0 runs it in one process.
# Debian's python3 with the pytest and pytest-xdist install-deps puts there,
# whatever other python3 comes first in PATH.
IT_WORKERS ?= 2
IT_PYTEST  := /usr/bin/python3 -m pytest -q -n $(IT_WORKERS) --dist loadfile
test-integration: all
	$(IT_PYTEST) tests/integration

# The data tests again with every server listening only on tls:// (TLS 1.3):
# mounts, tools, registration and COPY between I/O servers inside TLS. The
# random tester's runs are shorter here: the plain pass has the long ones.
TLS_SUITE := test_data.py test_copy.py test_multimount.py test_fsx.py
test-integration-tls: all
	RDFS_TEST_TRANSPORT=tls RDFS_FSX_OPS=6000 \
		$(IT_PYTEST) $(addprefix tests/integration/,$(TLS_SUITE))

# The unit tests again under ASan + UBSan, in a build of their own: a leak, an
# out-of-bounds access or undefined behaviour anywhere they reach fails the run.
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
             -fno-sanitize-recover=undefined
test-sanitize:
	$(MAKE) -j$(JOBS) BUILD=$(BUILD)-san CFLAGS="$(SAN_FLAGS)" CXXFLAGS="$(subst -O1,-O0,$(SAN_FLAGS))" \
		LDFLAGS="-fsanitize=address,undefined" \
		$(patsubst $(BUILD)/%,$(BUILD)-san/%,$(UNIT_BINS))
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		tests/unit/run-parallel --split $(BUILD)-san/tests/test_client:2 \
		$(patsubst $(BUILD)/%,$(BUILD)-san/%,$(UNIT_BINS))

# The transport and client unit tests under ThreadSanitizer (build-tsan/):
# their threads share connections, queues and caches; any data race fails.
TSAN_FLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_BINS  := $(BUILD)-tsan/tests/test_lib $(BUILD)-tsan/tests/test_client
# Left out under TSan (run plain and under ASan): the failure scenarios of
# files with copies that mostly wait out timeouts and fences. They cost 90 of
# test_client's 180 s under TSan, and their client paths run in its other tests.
# Also ClientStaleReply.*: they hold the inode table lock across a COMMIT on
# purpose (to apply a reply late), an order the library never takes, which
# TSan reports as a lock-order inversion.
TSAN_SKIP  := ClientStaleReply.*:ClientCopies.HungServerIsRoutedAroundAfterTheTimeout:ClientCopies.ServerKilledMidReadCostsTheReaderNothing:ClientCopies.RebalanceEvensOutANewServerWhileAFileIsWritten:StableAndUnstable/ClientCopiesWrite.*
test-tsan:
	$(MAKE) -j$(JOBS) BUILD=$(BUILD)-tsan CFLAGS="$(TSAN_FLAGS)" CXXFLAGS="$(subst -O1,-O0,$(TSAN_FLAGS))" \
		LDFLAGS="-fsanitize=thread" $(TSAN_BINS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		tests/unit/run-parallel --split $(BUILD)-tsan/tests/test_client:2 \
		$(TSAN_BINS) -- --gtest_filter=-$(TSAN_SKIP)

# The servers, rdfs-fuse and the tools under ASan + UBSan (build-san/bin), in a
# short integration run of the suites that throw hostile and malformed input
# at them. Every report is written to a file; any file fails the run. The
# memory-bound checks are left out: ASan's own memory is not the servers'.
SAN_IT_SUITE := test_frames.py test_trust.py test_data.py test_fsck.py test_copy.py
SAN_IT_LOGS  := $(BUILD)-san/it-reports
test-integration-san:
	$(MAKE) -j$(JOBS) BUILD=$(BUILD)-san CFLAGS="$(SAN_FLAGS)" CXXFLAGS="$(subst -O1,-O0,$(SAN_FLAGS))" \
		LDFLAGS="-fsanitize=address,undefined" all
	rm -rf $(SAN_IT_LOGS) && mkdir -p $(SAN_IT_LOGS)
	ASAN_OPTIONS=log_path=$(abspath $(SAN_IT_LOGS))/asan:detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:log_path=$(abspath $(SAN_IT_LOGS))/ubsan \
	RDFS_BIN=$(abspath $(BUILD)-san/bin) $(IT_PYTEST) \
		$(addprefix tests/integration/,$(SAN_IT_SUITE)) -k "not stays_bounded"; \
	status=$$?; \
	if [ -n "$$(ls $(SAN_IT_LOGS))" ]; then \
		echo "sanitizer reports from the servers and clients:"; \
		head -n 40 $(SAN_IT_LOGS)/*; exit 1; fi; \
	exit $$status

# clang-format (.clang-format) on every user-space .c/.h except the older files
# tests/format-exempt.txt lists (tests/check-format says which and why).
check-format:
	@deploy/install-deps --fuzz
	tests/check-format

# Every log call's message id (lib/log.h, client-lkm/rdfs_msg.h): present,
# well formed, handed out by tests/log-ids and used once (tests/check-log-ids).
check-log-ids:
	tests/check-log-ids

# The kernel client against the kernel's own checks: checkpatch.pl (from
# Debian's linux-source, unpacked into $(BUILD)/checkpatch) on its sources and
# wire/, and a W=1 build of the module; any warning fails.
LINUX_SRC := /usr/src/linux-source-6.1.tar.xz
CHECKPATCH := $(BUILD)/checkpatch/scripts/checkpatch.pl
$(CHECKPATCH):
	@deploy/install-deps --vm
	@mkdir -p $(BUILD)/checkpatch
	tar -xJf $(LINUX_SRC) -C $(BUILD)/checkpatch --strip-components=1 \
		--wildcards '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch'
	@touch $@
check-lkm: lkm $(CHECKPATCH)
	@set -e; out=$$(for f in client-lkm/*.[ch] wire/*.h; do \
		$(CHECKPATCH) --no-tree --terse --max-line-length=100 -f $$f | grep -v '^total' || true; \
		done); if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; echo "checkpatch: clean"
	@set -e; kver=$(if $(KVER),$(KVER),$$(tests/vm/run --print-kver)); \
	out=$$($(MAKE) -s -j$(JOBS) -C /lib/modules/$$kver/build M=$(abspath $(BUILD)/lkm) W=1 \
		modules 2>&1 | grep -E 'warning:|error:' || true); \
	if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; echo "W=1: no warnings"

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets (tests/fuzz/fuzz_*.c) for every decoder of network bytes,
# built with clang under ASan + UBSan in build-fuzz/ (the libraries too, with
# coverage); fuzz_ms_dispatch and fuzz_ios_dispatch drive whole requests
# through the metaserver's and the I/O server's dispatch. `make test-fuzz` (in
# make test) runs each on its seed corpus and regression inputs, then
# FUZZ_RUNS new inputs (FUZZ_DISPATCH_RUNS for *_dispatch: a server's work per
# input, and for the metaserver a leak check over its heap after most, so
# fewer: about 25 s for both); `make fuzz FUZZ_SECONDS=N` runs each
# for N seconds (default 60), keeping what it finds in build-fuzz/corpus/NAME
# (new coverage) and build-fuzz/crash-NAME-* (findings: fix, then copy the
# input to tests/fuzz/regressions/NAME/).
FUZZ_BUILD   := build-fuzz
FUZZ_FLAGS   := -O1 -g -fsanitize=fuzzer-no-link,address,undefined \
                -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_NAMES   := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(addprefix $(FUZZ_BUILD)/fuzz/,$(FUZZ_NAMES))
FUZZ_RUNS    ?= 500000
FUZZ_DISPATCH_RUNS ?= 10000
FUZZ_SECONDS ?= 60
# The kernel client's codec is built unchanged over these stand-ins for its headers.
KSHIM        := -Itests/fuzz/kshim -Iclient-lkm

$(BUILD)/fuzz/kcodec.o: client-lkm/codec.c wire/rdfs_frame.h
	@mkdir -p $(dir $@)
	$(CC) $(KSHIM) -Iwire $(CFLAGS) -w -c $< -o $@
$(BUILD)/fuzz/fuzz_lkm_codec: tests/fuzz/fuzz_lkm_codec.c $(BUILD)/fuzz/kcodec.o $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(KSHIM) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(LIBMS) $(LIBIOS) $(LIBRDFS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(RDFS_CFLAGS) $(CFLAGS) -fsanitize=fuzzer -o $@ $< \
		$(LIBMS) $(LIBIOS) $(LIBRDFS) $(PKG_LIBS)

fuzz-build:
	@deploy/install-deps --fuzz
	$(MAKE) -j$(JOBS) BUILD=$(FUZZ_BUILD) CC=clang CXX=clang++ CFLAGS="$(FUZZ_FLAGS)" $(FUZZ_BINS)

# Seeds and regressions first (every one must pass), then FUZZ_RUNS new inputs.
test-fuzz: fuzz-build
	@set -e; for n in $(FUZZ_NAMES); do \
		echo "== $$n"; rm -rf $(FUZZ_BUILD)/run/$$n; mkdir -p $(FUZZ_BUILD)/run/$$n; \
		runs=$(FUZZ_RUNS); case $$n in *_dispatch) runs=$(FUZZ_DISPATCH_RUNS);; esac; \
		seeds=""; for d in tests/fuzz/corpus/$$n tests/fuzz/regressions/$$n; do \
			[ -d $$d ] && seeds="$$seeds $$d"; done; \
		if ! UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
			$(FUZZ_BUILD)/fuzz/$$n -runs=$$runs -seed=1 -max_len=65536 \
			-artifact_prefix=$(FUZZ_BUILD)/crash-$$n- \
			$(FUZZ_BUILD)/run/$$n $$seeds > $(FUZZ_BUILD)/run/$$n.log 2>&1; then \
			tail -n 60 $(FUZZ_BUILD)/run/$$n.log; exit 1; fi; \
		tail -n 1 $(FUZZ_BUILD)/run/$$n.log; done

fuzz: fuzz-build
	@set -e; for n in $(FUZZ_NAMES); do \
		echo "== $$n: $(FUZZ_SECONDS) s"; mkdir -p $(FUZZ_BUILD)/corpus/$$n; \
		seeds=""; for d in tests/fuzz/corpus/$$n tests/fuzz/regressions/$$n; do \
			[ -d $$d ] && seeds="$$seeds $$d"; done; \
		$(FUZZ_BUILD)/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
			-artifact_prefix=$(FUZZ_BUILD)/crash-$$n- \
			$(FUZZ_BUILD)/corpus/$$n $$seeds; done

# The model-based random tester (tests/fsx/rdfs_fsx.py) on real mounts, at length:
# five runs of FSX_OPS operations each (make test runs 20000 or 6000).
FSX_OPS ?= 200000
soak: all
	RDFS_FSX_OPS=$(FSX_OPS) python3 -m pytest -q tests/integration/test_fsx.py

demo: deps
	$(MAKE) -j$(JOBS) all
	deploy/demo

# The units name the programs under /usr/local/bin; installed, they name $(PREFIX)/bin.
install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/sbin $(DESTDIR)/etc/rdfs
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(filter %.1,$(MANPAGES)) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(filter %.8,$(MANPAGES)) $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0755 deploy/mount.fuse.rdfs $(DESTDIR)/sbin/mount.fuse.rdfs
	install -m 0755 client-lkm/mount.rdfs $(DESTDIR)/sbin/mount.rdfs
	test -e $(DESTDIR)/etc/rdfs/rdfs.conf || install -m 0644 deploy/rdfs.conf.example $(DESTDIR)/etc/rdfs/rdfs.conf
	install -d $(DESTDIR)$(UNITDIR)
	for u in deploy/systemd/*.service; do \
		sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' $$u > $(DESTDIR)$(UNITDIR)/$${u##*/} && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; done
	@if [ -f $(BUILD)/lkm/rdfs.ko ]; then $(MAKE) --no-print-directory install-lkm; \
	else echo "make install: kernel client not built (make lkm), not installed"; fi

# The kernel client, after `make lkm`: rdfs.ko into the modules of the kernel
# it was built for (then `modprobe rdfs`), the helper, and /sbin/mount.rdfs so
# that `mount -t rdfs` and fstab lines work.
install-lkm:
	@test -f $(BUILD)/lkm/rdfs.ko || { echo "install-lkm: $(BUILD)/lkm/rdfs.ko not built (make lkm)" >&2; exit 1; }
	kver=$$(modinfo -F vermagic $(BUILD)/lkm/rdfs.ko | cut -d' ' -f1) && \
	install -d $(DESTDIR)/lib/modules/$$kver/extra && \
	install -m 0644 $(BUILD)/lkm/rdfs.ko $(DESTDIR)/lib/modules/$$kver/extra/rdfs.ko && \
	if [ -z "$(DESTDIR)" ]; then depmod -a $$kver; fi
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/sbin
	install -m 0755 $(BUILD)/lkm/rdfs-lkm-helper $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 client-lkm/mount.rdfs $(DESTDIR)/sbin/mount.rdfs

# Debian packages (debian/): the tree's files (git's, tracked or not ignored,
# as they are now) are copied to $(DEB_DIR)/rdfs-VERSION and built there with
# dpkg-buildpackage (no root needed), so the .debs, the .dsc and the source
# tarball land in $(DEB_DIR); then lintian checks them all and fails on any
# error or warning (the overrides in debian/*.lintian-overrides say why).
DEB_DIR ?= $(BUILD)/deb
deb:
	@deploy/install-deps --deb
	@test -n "$(VERSION)" || { echo "make deb: no version in debian/changelog" >&2; exit 1; }
	@git ls-files --error-unmatch debian/changelog >/dev/null 2>&1 || { echo "make deb: \
	not in a git checkout of rdfs (in an unpacked source package: dpkg-buildpackage)" >&2; \
	exit 1; }
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/rdfs-$(VERSION)
	git ls-files -z -c -o --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - | tar -xf - -C $(DEB_DIR)/rdfs-$(VERSION)
	cd $(DEB_DIR)/rdfs-$(VERSION) && dpkg-buildpackage -us -uc -j$(JOBS)
	lintian --fail-on error,warning --display-info --pedantic \
		$(DEB_DIR)/rdfs_$(VERSION)_$$(dpkg --print-architecture).changes
	@ls -l $(DEB_DIR)/*.deb

clean:
	rm -rf $(BUILD) $(BUILD)-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
