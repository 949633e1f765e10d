# h2park: everything builds into $(BUILD) (build/ by default).
#
#   make                   the daemon, libscalloc.a and libscalloc.so, tools, tests and benches
#   make run               build and start the daemon on the embedded default config
#                          (ARGS='--parking off' passes options)
#   make test              build and run every test; SAN=1 under ASan+UBSan; TSAN=1 the
#                          allocator, coroutine and stress tests under ThreadSanitizer
#   make install           install-daemon and install-lib, under PREFIX (/usr/local),
#                          staged under DESTDIR if set
#   make install-daemon    h2park, its config, systemd units and man page
#   make install-lib       libscalloc.a (and .so), its headers and scalloc.pc
#   make test-preload      real programs (python3, gcc, git, perl, sqlite3, nghttpd, redis)
#                          run with LD_PRELOAD=build/libscalloc.so, their output checked
#   make bench-alloc       allocator benchmark (figures in docs/performance.md), then bench-programs
#   make bench-programs    the drop-in against glibc, jemalloc, mimalloc and tcmalloc by
#                          LD_PRELOAD on workloads, python3, gcc and redis (BENCH_QUICK=1: short)
#   make bench-coro        coroutine benchmark
#   make fuzz              every libFuzzer target for FUZZ_SECONDS each (clang)
#
# Build options (a change of any of them rebuilds everything):
#   CC=gcc|clang  SIZE_SPECIALIZED=1|0  CORO=asm|ucontext  SAN=0|1  TSAN=0|1
#   CORO_CHECKS=1 (coro_resume checks its coroutine is suspended in the inline switch too)

BUILD ?= build
SIZE_SPECIALIZED ?= 1
CORO ?= asm
SAN ?= 0
TSAN ?= 0

CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Werror -Wno-error=unused-command-line-argument
ifneq ($(shell $(CC) -v 2>&1 | grep -c clang),1)
WARN := -Wall -Wextra -Werror
endif
# SIZE_SPECIALIZED reaches the code through the generated sc_config.h (below), which is
# installed with the library so that its users need no -D.
DEFS :=
ifeq ($(CORO),ucontext)
DEFS += -DCORO_UCONTEXT=1
endif
ifneq ($(CORO_CHECKS),)
DEFS += -DCORO_CHECKS=$(CORO_CHECKS)
endif
SANFLAGS :=
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# The fuzzers' build: coverage for libFuzzer, ASan and UBSan (make fuzz sets it).
ifeq ($(SAN),fuzz)
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(TSAN),1)
ifeq ($(SAN),1)
$(error SAN=1 and TSAN=1 cannot be combined)
endif
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
endif
# Stack clash protection: a frame larger than a page is touched page by page, so no frame
# can step over a coroutine's guard page (tests/test_coro.c).
HARDEN := -fstack-clash-protection
# HTTP/1.1 is parsed by llhttp, compiled from the sources Debian's node-llhttp ships.
LLHTTP_DIR ?= /usr/share/llhttp
LLHTTP_INC ?= /usr/share/include/llhttp
ALL_CFLAGS := -std=gnu11 $(CFLAGS) $(WARN) $(HARDEN) $(SANFLAGS) $(DEFS) -pthread \
              -I$(BUILD)/gen -Ialloc -Icoro -Iserver -I$(LLHTTP_INC)
LDFLAGS_ALL := $(SANFLAGS) -pthread $(LDFLAGS)
SERVER_LIBS := -lnghttp2 -lssl -lcrypto -lcrypt -lev -lm -lz -lbrotlienc -lzstd

# Objects depend on the flags they were built with.
FLAGS_STR := $(CC) $(ALL_CFLAGS) $(LDFLAGS_ALL) SIZE_SPECIALIZED=$(SIZE_SPECIALIZED)
$(shell mkdir -p $(BUILD)/obj $(BUILD)/gen; \
  echo '$(FLAGS_STR)' | cmp -s - $(BUILD)/flags || echo '$(FLAGS_STR)' > $(BUILD)/flags)

ALLOC_SRC := alloc/fatal.c alloc/pageheap.c alloc/span.c alloc/central.c alloc/cache.c \
             alloc/malloc.c alloc/quarantine.c alloc/scavenge.c alloc/growth.c alloc/stats.c \
             alloc/fork.c alloc/valgrind.c alloc/foreign.c alloc/conf.c
ALLOC_OBJ := $(ALLOC_SRC:%.c=$(BUILD)/obj/%.o)
GEN := $(BUILD)/gen/sc_sizeclasses.h $(BUILD)/gen/sc_specialized.h $(BUILD)/gen/sc_config.h

# The C library's malloc family on the heap (alloc/export.c), for the daemon: an object,
# not an archive member, so that its definitions are always linked.  Not in sanitizer
# builds, whose runtimes hand out memory of their own heaps (ASan's strdup and realpath
# interceptors) that a free here would reject; there mem.c's hooks route the libraries.
MALLOC_OBJ := $(BUILD)/obj/alloc/export.o
DAEMON_MALLOC := $(if $(filter 00,$(SAN)$(TSAN)),$(MALLOC_OBJ))

# The drop-in malloc for LD_PRELOAD: the same sources built position-independent, with
# initial-exec TLS (SC_SHARED), exporting what alloc/libscalloc.map lists.  Not in
# sanitizer builds, whose runtimes must be the first allocator a process loads.
PIC_OBJ := $(ALLOC_SRC:%.c=$(BUILD)/pic/%.o) $(BUILD)/pic/alloc/export.o $(BUILD)/pic/alloc/report.o \
           $(BUILD)/pic/alloc/newdelete.o
SHARED_LIB := $(if $(filter 00,$(SAN)$(TSAN)),$(BUILD)/libscalloc.so)
# The same for static linking: an archive of export.o alone, which a program names before
# libscalloc.a (its undefined malloc pulls the member in); kept out of libscalloc.a so that
# linking the heap never replaces a program's malloc unasked.
MALLOC_LIB := $(if $(DAEMON_MALLOC),$(BUILD)/libscalloc_malloc.a)

CORO_SRC := coro/coro.c coro/switch_ucontext.c
CORO_ASM := coro/switch_x86_64.S coro/switch_aarch64.S
CORO_OBJ := $(CORO_SRC:%.c=$(BUILD)/obj/%.o) $(CORO_ASM:%.S=$(BUILD)/obj/%.o)

SERVER_SRC := $(sort $(wildcard server/*.c server/*/*.c))
LLHTTP_OBJ := $(BUILD)/obj/llhttp/api.o $(BUILD)/obj/llhttp/http.o $(BUILD)/obj/llhttp/llhttp.o
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/server/embed.o $(LLHTTP_OBJ)

# test_export links the exported malloc family, which sanitizer builds leave out.
UNIT_TESTS := $(BUILD)/tests/test_alloc $(if $(DAEMON_MALLOC),$(BUILD)/tests/test_export) \
              $(BUILD)/tests/test_coro $(BUILD)/tests/test_stress $(BUILD)/tests/h2raw
BENCHES := $(BUILD)/bench/bench_alloc $(BUILD)/bench/bench_coro $(BUILD)/bench/bench_workloads $(BUILD)/bench/bench_copy \
           $(if $(SHARED_LIB),$(BUILD)/bench/librss_probe.so)

# What tests/e2e_preload.sh runs under the drop-in (built against glibc alone).
PRELOAD_TESTS := $(if $(SHARED_LIB),$(BUILD)/tests/preload_corners $(BUILD)/tests/libpreload_tls.so)

TARGETS := $(BUILD)/libscalloc.a $(SHARED_LIB) $(MALLOC_LIB) $(BUILD)/sc-classes $(UNIT_TESTS) $(PRELOAD_TESTS) $(BENCHES)
ifneq ($(SERVER_SRC),)
TARGETS += $(BUILD)/h2park $(BUILD)/tests/test_config
endif
TARGETS += $(BUILD)/h2park.8 $(BUILD)/tests/test_clienttable $(BUILD)/tests/test_proxy $(BUILD)/tests/test_copy $(BUILD)/tests/test_h1resp \
           $(BUILD)/tests/test_upstream $(BUILD)/tests/test_parking $(BUILD)/tests/test_exchange \
           $(BUILD)/tests/test_passcheck
TARGETS += $(BUILD)/tests/test_rate $(BUILD)/tests/test_gzpark $(BUILD)/tests/test_acceptenc $(BUILD)/tests/test_encode

.PHONY: all run test test-preload install bench-alloc bench-programs bench-coro fuzz fuzzers clean
all: $(TARGETS)

# The Debian packages the goals need, installed before make reads a rule that names their
# files: make would otherwise remember /usr/share/llhttp as missing and stop with "No rule
# to make target" on a fresh machine.  Each purpose's check is an included makefile that is
# always remade (scripts/ensure-deps.sh, a dpkg-query) and changes only when packages were
# installed, which makes make read everything again, from a fresh look at the disk.  Not
# root, the check installs nothing: it stops and prints the apt-get line.
DEPS_FOR := $(sort $(if $(filter test test-preload,$(MAKECMDGOALS)),test) \
                   $(if $(filter bench-%,$(MAKECMDGOALS)),bench) \
                   $(if $(filter fuzz,$(MAKECMDGOALS)),fuzz))
DEPS_FOR := $(if $(DEPS_FOR),$(DEPS_FOR),$(if $(filter-out clean,$(or $(MAKECMDGOALS),all)),build))
ifneq ($(DEPS_FOR),)
include $(DEPS_FOR:%=$(BUILD)/deps/%.mk)
endif
$(BUILD)/deps/%.mk: FORCE
	@scripts/ensure-deps.sh $* $@
.PHONY: FORCE
FORCE:

$(BUILD)/mksizeclasses: alloc/mksizeclasses.c
	$(CC) -std=gnu11 -O1 $(WARN) -o $@ $<
$(BUILD)/gen/sc_sizeclasses.h: $(BUILD)/mksizeclasses $(BUILD)/flags
	$< tables > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/sc_specialized.h: $(BUILD)/mksizeclasses
	$< specialized > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/sc_config.h: $(BUILD)/flags
	printf '/* Generated by the Makefile: how this libscalloc was built. */\n#define SC_SIZE_SPECIALIZED %s\n' \
	  $(SIZE_SPECIALIZED) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/%.o: %.c $(GEN) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/pic/%.o: %.c $(GEN) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -fno-semantic-interposition -DSC_SHARED=1 -MMD -MP -c -o $@ $<
$(BUILD)/obj/%.o: %.S $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/server/embed.o: config/default.conf www/index.html server/app/dashboard.html
# Third-party, generated C: built as shipped, with our sanitizers but not our warnings.
$(BUILD)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(CFLAGS) $(SANFLAGS) -w -I$(LLHTTP_INC) -c -o $@ $<

$(BUILD)/libscalloc.a: $(ALLOC_OBJ)
	rm -f $@ && ar rcs $@ $^
# -z nodelete: memory it handed out may outlive any dlclose.
$(BUILD)/libscalloc.so: $(PIC_OBJ) alloc/libscalloc.map
	$(CC) -shared -o $@ $(PIC_OBJ) -Wl,--version-script=alloc/libscalloc.map -Wl,-Bsymbolic \
	  -Wl,-z,nodelete $(LDFLAGS_ALL)
$(BUILD)/libscalloc_malloc.a: $(MALLOC_OBJ)
	rm -f $@ && ar rcs $@ $^
$(BUILD)/libcoro.a: $(CORO_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/sc-classes: $(BUILD)/obj/alloc/sc_classes.o $(BUILD)/libscalloc.a
	$(CC) -o $@ $^ $(LDFLAGS_ALL)

$(BUILD)/h2park: $(SERVER_OBJ) $(DAEMON_MALLOC) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)

$(BUILD)/tests/h2raw: $(BUILD)/obj/tests/h2raw.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)
$(BUILD)/tests/test_alloc: $(BUILD)/obj/tests/test_alloc.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)
# Both link tests/atfork_alloc.c's library, whose constructor runs before the heap's.
ATFORK_LIB := -L$(BUILD)/tests -Wl,--no-as-needed -latfork_alloc -Wl,--as-needed -Wl,-rpath,'$$ORIGIN'
$(BUILD)/tests/test_export: $(BUILD)/obj/tests/test_export.o $(MALLOC_OBJ) $(BUILD)/libscalloc.a $(BUILD)/tests/libatfork_alloc.so
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o %.a,$^) $(ATFORK_LIB) $(LDFLAGS_ALL)
$(BUILD)/tests/preload_corners: $(BUILD)/obj/tests/preload_corners.o $(BUILD)/tests/libatfork_alloc.so
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o,$^) $(ATFORK_LIB) -ldl $(LDFLAGS_ALL)
$(BUILD)/tests/libatfork_alloc.so: tests/atfork_alloc.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_ALL)
$(BUILD)/tests/libpreload_tls.so: tests/preload_tls.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_ALL)
$(BUILD)/tests/test_stress: $(BUILD)/obj/tests/test_stress.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)
$(BUILD)/tests/test_coro: $(BUILD)/obj/tests/test_coro.o $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lm $(LDFLAGS_ALL)
$(BUILD)/tests/test_config: $(BUILD)/obj/tests/test_config.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)

# The per-client table alone (with the address parsing it keys by): TSAN=1 runs it too.
$(BUILD)/tests/test_clienttable: $(BUILD)/obj/tests/test_clienttable.o $(BUILD)/obj/server/clienttable.o $(BUILD)/obj/server/netaddr.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)

$(BUILD)/tests/test_proxy: $(BUILD)/obj/tests/test_proxy.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)
# One worker's upstream state (balancer, pool) in process, over unix sockets.
$(BUILD)/tests/test_upstream: $(BUILD)/obj/tests/test_upstream.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)
# Parking stepped in process, on the fuzzers' daemon (tests/fuzz/harness.c).
$(BUILD)/tests/test_parking: $(BUILD)/obj/tests/test_parking.o $(BUILD)/obj/tests/fuzz/harness.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)
# The upstream exchange's clients: a neutral request head in HTTP/1.1 and HTTP/2.
$(BUILD)/tests/test_exchange: $(BUILD)/obj/tests/test_exchange.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)
$(BUILD)/tests/test_h1resp: $(BUILD)/obj/tests/test_h1resp.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)
$(BUILD)/tests/test_passcheck: $(BUILD)/obj/tests/test_passcheck.o $(BUILD)/obj/server/app/passcheck.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lcrypt -lcrypto $(LDFLAGS_ALL)
# The parking gzip stream alone, decoded by zlib.
$(BUILD)/tests/test_gzpark: $(BUILD)/obj/tests/test_gzpark.o $(BUILD)/obj/server/runtime/gzpark.o $(BUILD)/obj/server/buf.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lz $(LDFLAGS_ALL)
$(BUILD)/tests/test_rate: $(BUILD)/obj/tests/test_rate.o $(BUILD)/obj/server/runtime/rate.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lm $(LDFLAGS_ALL)
$(BUILD)/tests/test_acceptenc: $(BUILD)/obj/tests/test_acceptenc.o $(BUILD)/obj/server/runtime/acceptenc.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)
$(BUILD)/tests/test_encode: $(BUILD)/obj/tests/test_encode.o $(BUILD)/obj/server/runtime/encode.o $(BUILD)/obj/server/runtime/acceptenc.o \
                          $(BUILD)/obj/server/buf.o $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lz -lbrotlienc -lbrotlidec -lzstd $(LDFLAGS_ALL)
$(BUILD)/tests/test_copy: $(BUILD)/obj/tests/test_copy.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)

$(BUILD)/bench/bench_alloc: bench/bench_alloc.c $(BUILD)/libscalloc.a $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ bench/bench_alloc.c $(BUILD)/libscalloc.a -ldl $(LDFLAGS_ALL)
# Against glibc alone: the allocator under test is preloaded (bench/bench-programs.sh).
$(BUILD)/bench/bench_workloads: $(BUILD)/obj/bench/bench_workloads.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)
$(BUILD)/bench/bench_coro: $(BUILD)/obj/bench/bench_coro.o $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -ldl $(LDFLAGS_ALL)
# Preloaded after the drop-in, whose sc_ functions it calls (bench/rss_probe.c).
$(BUILD)/bench/librss_probe.so: bench/rss_probe.c $(GEN) $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -shared -o $@ $< $(LDFLAGS_ALL)
$(BUILD)/bench/bench_copy: $(BUILD)/obj/bench/bench_copy.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS_ALL)

FUZZ_TARGETS := conn h2 h1 config path proxy upstream acceptenc
FUZZERS := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
fuzzers: $(FUZZERS)
$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/harness.o $(filter-out $(BUILD)/obj/server/main.o,$(SERVER_OBJ)) $(BUILD)/libcoro.a $(BUILD)/libscalloc.a
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer -o $@ $^ $(SERVER_LIBS) $(LDFLAGS_ALL)

# The Accept-Encoding parser alone: a string in, a choice out (no daemon to set up).
$(BUILD)/fuzz/fuzz_acceptenc: $(BUILD)/obj/tests/fuzz/fuzz_acceptenc.o $(BUILD)/obj/server/runtime/acceptenc.o
	@mkdir -p $(dir $@)
	$(CC) -fsanitize=fuzzer -o $@ $^ $(LDFLAGS_ALL)

FUZZ_SECONDS ?= 60
fuzz:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/fuzzing CC=clang SAN=fuzz fuzzers
	@BUILD=$(BUILD)/fuzzing FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

run: all
	@scripts/run-default.sh $(BUILD) $(ARGS)

# The daemon as a service.  The manual is generated from the operations and configuration
# pages of docs/ (scripts/man.awk).
# The config is installed with root pointing at the installed page, and only if there
# is none yet: an edited one is never overwritten.
PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
SYSCONFDIR ?= $(PREFIX)/etc
DATADIR ?= $(PREFIX)/share
UNITDIR ?= $(PREFIX)/lib/systemd/system
H2PARK_VERSION := $(shell sed -n 's/^\#define H2PARK_VERSION "\(.*\)"/\1/p' server/config.h)
MAN_SOURCES := docs/operations.md docs/configuration.md
$(BUILD)/h2park.8: $(MAN_SOURCES) scripts/man.awk server/config.h
	awk -v version=$(H2PARK_VERSION) -f scripts/man.awk $(MAN_SOURCES) > $@.tmp && mv $@.tmp $@
.PHONY: install install-daemon install-lib
install: install-daemon install-lib
install-daemon: $(BUILD)/h2park $(BUILD)/h2park.8
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSCONFDIR)/h2park $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(DATADIR)/man/man8 $(DESTDIR)$(DATADIR)/h2park/www
	install -m 755 $(BUILD)/h2park $(DESTDIR)$(SBINDIR)/h2park
	install -m 644 $(BUILD)/h2park.8 $(DESTDIR)$(DATADIR)/man/man8/h2park.8
	install -m 644 www/index.html $(DESTDIR)$(DATADIR)/h2park/www/index.html
	test -e $(DESTDIR)$(SYSCONFDIR)/h2park/h2park.conf || \
	  sed 's|^root = ./www$$|root = $(DATADIR)/h2park/www|' config/default.conf > $(DESTDIR)$(SYSCONFDIR)/h2park/h2park.conf
	for u in h2park.service h2park.socket; do \
	  sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' dist/$$u.in > $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	  chmod 644 $(DESTDIR)$(UNITDIR)/$$u; done

# The allocator as a library: one include directory (its sc_config.h says how the library
# was built) and a pkg-config file whose Libs carry what linking it needs (the sanitizer
# runtime in SAN/TSAN builds).  Libs names the archive: a program links scalloc
# statically, with local-exec TLS; the .so beside it is the drop-in for LD_PRELOAD.
SC_VERSION := 0.1.0
install-lib: $(BUILD)/libscalloc.a $(SHARED_LIB) $(MALLOC_LIB) $(GEN)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/scalloc
	install -m 644 $(BUILD)/libscalloc.a $(MALLOC_LIB) $(DESTDIR)$(PREFIX)/lib/
	$(if $(SHARED_LIB),install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/)
	install -m 644 alloc/scalloc.h $(BUILD)/gen/sc_specialized.h $(BUILD)/gen/sc_config.h \
	  $(DESTDIR)$(PREFIX)/include/scalloc/
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include/scalloc' 'libdir=$${prefix}/lib' '' \
	  'Name: scalloc' 'Description: a Go-style size-class heap for C (from h2park)' 'Version: $(SC_VERSION)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -l:libscalloc.a -pthread $(strip $(SANFLAGS))' \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/scalloc.pc

# Both allocator builds, with and without size-specialized malloc, both context switches
# and the checked inline switch pass the same unit tests.  Under
# ThreadSanitizer only the threaded parts run (the allocator, the coroutines, the
# stress, the per-client table) and no end-to-end test.  TESTS on the command line runs those test programs
# instead (E2E, the end-to-end scripts, is run.sh's own).  When a test fails, run.sh's
# "N passed, N failed" stays the last line and make still exits non-zero: see
# scripts/make-test-failed.sh.
VARIANT_TESTS := $(BUILD)/nospec/tests/test_alloc \
                 $(BUILD)/ucontext/tests/test_coro \
                 $(BUILD)/checks/tests/test_coro
ifeq ($(TSAN),1)
TEST_PROGS := $(BUILD)/tests/test_alloc $(BUILD)/tests/test_coro $(BUILD)/tests/test_stress $(BUILD)/tests/test_passcheck \
              $(BUILD)/tests/test_clienttable
test: $(TEST_PROGS)
else
TEST_PROGS := $(filter $(BUILD)/tests/test_%,$(TARGETS))
test: all
endif
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/nospec SIZE_SPECIALIZED=0 SAN=$(SAN) TSAN=$(TSAN) $(BUILD)/nospec/tests/test_alloc
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/ucontext CORO=ucontext SAN=$(SAN) TSAN=$(TSAN) $(BUILD)/ucontext/tests/test_coro
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/checks CORO_CHECKS=1 SAN=$(SAN) TSAN=$(TSAN) $(BUILD)/checks/tests/test_coro
	@BUILD=$(BUILD) CC="$(CC)" SAN=$(SAN) TSAN=$(TSAN) \
	  TESTS="$(if $(filter command line,$(origin TESTS)),$(TESTS),$(TEST_PROGS) $(VARIANT_TESTS))" tests/run.sh || \
	  scripts/make-test-failed.sh $$PPID $(MAKELEVEL) "$(MAKECMDGOALS)"

# The drop-in under real programs alone (make test runs it too).
test-preload: all
	@BUILD=$(BUILD) TESTS= E2E=tests/e2e_preload.sh tests/run.sh

bench-alloc: all
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/nospec SIZE_SPECIALIZED=0 $(BUILD)/nospec/bench/bench_alloc $(BUILD)/nospec/h2park
	@BUILD=$(BUILD) bench/bench-alloc.sh
	@$(MAKE) --no-print-directory bench-programs

# The drop-in against glibc, jemalloc, mimalloc and tcmalloc on workloads and programs
# (docs/performance.md's table); BENCH_QUICK=1 runs one short round, BENCH_OPTS passes the
# script's options (--only W,W --allocs A,A --rounds N: a run in pieces).
bench-programs: all
	@BUILD=$(BUILD) bench/bench-programs.sh $(if $(BENCH_QUICK),--quick) $(BENCH_OPTS)

bench-coro: all
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/ucontext CORO=ucontext $(BUILD)/ucontext/bench/bench_coro
	@BUILD=$(BUILD) bench/bench-coro.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/pic -name '*.d' 2>/dev/null)
