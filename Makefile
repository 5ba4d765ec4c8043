# gemma3 - CPU inference for Gemma 3.  `make` builds ./gemma3 and libgemma3.a.
#
#   make            the gemma3 command, libgemma3.a and the tools in build/
#   make test       every test suite (tests/run.sh); ends with "N passed, N failed, N skipped"
#   make asan       the same suites built with address + undefined-behaviour sanitizers
#   make tsan       the thread-pool and forward-determinism suites under ThreadSanitizer
#   make OPENMP=1   the same, threads on OpenMP instead of our pool, in build/omp (clang and
#                   LLVM's libomp, libomp-dev; CC=gcc: libgomp); any target: `make OPENMP=1 test`
#   make omp-test   the OpenMP build's thread, kernel and forward suites, and its logits against
#                   the default build's (bit-identical)
#   make bench-omp  pool and OpenMP builds (one compiler) side by side: decode and prefill, 270m
#                   and 1b, 1 and 2 threads, quiet and with a process spinning on one core
#   make cross-test kernel, tokenizer, sampling, ... suites cross-built for aarch64, run in
#                   qemu-user (needs gcc-aarch64-linux-gnu, qemu-user, libcjson-dev:arm64)
#   make bench      benchmarks (tok/s, MB/s, sampler time, pool vs OpenMP), printed as tables
#   make fuzz       libFuzzer targets (clang); FUZZ_SECONDS per target; reproducers of a finding
#                   in build/fuzz/artifacts/
#   make install    the gemma3 command, libgemma3.a, libgemma3.so, gemma3.h and gemma3.pc (for
#                   pkg-config) under PREFIX (default /usr/local), staged under DESTDIR if given;
#                   make uninstall removes them
#   make models     the bundled small synthetic checkpoint in models/
#   make mutation   mutation testing: tests/mutations.txt applied one at a time to a scratch copy
#                   (build/mutation), each followed by its suites; killed/survived and a score
#   make clean
#
# One portable binary: no -march=native. SIMD kernels carry per-function target attributes and
# are picked at run time from cpuid; on other CPUs (ARM, ...) the scalar kernels build alone.
#
# Warnings: plain `make` (a user's build, maybe with a newer compiler) warns; test, asan, tsan,
# cross-test and CI build with -Werror (WERROR=1; `make test WERROR=0` turns it off). Objects
# record the flags they were built with (BUILD/cflags), so `make` then `make test` recompiles
# once with -Werror instead of passing stale warnings.

CC ?= cc
OPT ?= -O2
CFLAGS ?= $(OPT) -g
WERROR ?= 0
WARN = -Wall -Wextra -Wshadow -Wno-unused-parameter $(if $(filter 1,$(WERROR)),-Werror)
STD := -std=c11 -D_GNU_SOURCE
DEPFLAGS = -MMD -MP
SAN_FLAGS :=
# OPENMP=1: threads.c on OpenMP. LLVM's libomp (clang, libomp-dev) unless CC is given: gcc's
# libgomp spins without yielding between regions and decodes several times slower than the pool
# on a loaded machine (docs/threads.md).
OPENMP ?= 0
OMP_CC := $(if $(filter default,$(origin CC)),clang,$(CC))
ifeq ($(OPENMP),1)
  CC := $(OMP_CC)
  BUILD ?= build/omp
  OMP_FLAGS := -fopenmp
endif
BUILD ?= build
LDLIBS := -lcjson -lm -lpthread
EDIT_LIBS := -ledit

# float-cast-overflow: a float converted to an integer it does not fit is undefined, and compilers
# differ on it (the reference quantizers' (int8_t) cast of an overflowed 1/d: 0x00 from GCC, 0x80
# from clang); -fsanitize=undefined leaves it out
ifeq ($(SAN),1)
  SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
               -fno-sanitize-recover=all
  OPT := -O1
endif
ifeq ($(SAN),thread)
  SAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
  OPT := -O1
endif

ALL_CFLAGS = $(STD) $(CFLAGS) $(WARN) $(SAN_FLAGS) $(OMP_FLAGS) $(DEPFLAGS) -I.

LIB_SRCS := $(wildcard util.c safetensors.c config.c weights.c gemma3.c kernels.c threads.c \
                       tokenizer.c protobuf.c utf8.c chat.c sampling.c rng.c \
                       quant.c quant-rows.c quantize-checkpoint.c state.c grammar.c json-schema.c)
# the sampler's parts: every file of sampling/ (a sampler added there needs no line here)
SAMPLING_SRCS := $(wildcard sampling/*.c)
LIB_SRCS += $(SAMPLING_SRCS)
LIB_SRCS += $(wildcard kernels/*.c)
LIB_SRCS += grammar-parse.c
LIB_SRCS += speculative.c
LIB_SRCS += outfile.c
LIB_SRCS += gguf.c gguf-model.c
LIB_SRCS += quant-k.c quant-mix.c
CLI_SRCS := $(wildcard cli/*.c)
TEST_SRCS := $(wildcard tests/test-*.c)
TOOL_SRCS := $(wildcard tools/*.c)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/tools/%)
LIB := $(BUILD)/libgemma3.a
BIN := $(BUILD)/gemma3

.PHONY: all test asan clang-ubsan tsan omp-test cross-test bench bench-omp fuzz models mutation \
        clean FORCE shared install uninstall

test asan tsan omp-test cross-test: WERROR = 1

all: $(BIN) $(LIB) $(TOOL_BINS)
ifeq ($(BUILD),build)
	@cp $(BIN) gemma3 && cp $(LIB) libgemma3.a
endif

# Rewritten only when the compile command changes; everything compiled depends on it.
FLAGS_STAMP := $(BUILD)/cflags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(ALL_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS)' >$@

# --version and bench's build_commit/build_number: the commit this build was made from.
BUILD_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILD_NUMBER := $(shell git rev-list --count HEAD 2>/dev/null || echo 0)
$(BUILD)/build-info: FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD_COMMIT) $(BUILD_NUMBER)' | cmp -s - $@ || echo '$(BUILD_COMMIT) $(BUILD_NUMBER)' >$@
$(BUILD)/cli/version.o: $(BUILD)/build-info
$(BUILD)/cli/version.o: ALL_CFLAGS += -DG3_BUILD_COMMIT='"$(BUILD_COMMIT)"' -DG3_BUILD_NUMBER=$(BUILD_NUMBER)

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The suites link TEST_LIB: the library with the sampler built again with its counters of which
# path answered (-DG3_SAMPLER_STATS, sampling/state.h), which only the tests read; the command,
# libgemma3.a and the tools (bench-sampling among them) have none.
SAMPLER_SRCS := sampling.c $(SAMPLING_SRCS)
STATS_OBJS := $(SAMPLER_SRCS:%.c=$(BUILD)/stats/%.o)
TEST_LIB := $(BUILD)/libgemma3-tests.a
$(BUILD)/stats/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DG3_SAMPLER_STATS -c $< -o $@

$(TEST_LIB): $(filter-out $(SAMPLER_SRCS:%.c=$(BUILD)/%.o),$(LIB_OBJS)) $(STATS_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJS) $(LIB)
	$(CC) $(CFLAGS) $(SAN_FLAGS) $(OMP_FLAGS) -o $@ $(CLI_OBJS) $(LIB) $(LDLIBS) $(EDIT_LIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(TEST_LIB) $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

test: all $(TEST_BINS)
	@BUILD=$(BUILD) sh tests/run.sh

asan:
	$(MAKE) BUILD=build/asan SAN=1 test

# clang's UBSan over every suite (not in CI: clang takes about ten minutes over kernels.c with
# it). It checks what GCC's leaves out, such as pointer arithmetic that overflows.
CLANG_UBSAN_FLAGS := -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all \
                     -fno-omit-frame-pointer
clang-ubsan:
	$(MAKE) BUILD=build/clang-ubsan CC=clang SAN=1 SAN_FLAGS="$(CLANG_UBSAN_FLAGS)" test

# ThreadSanitizer over the suites that run threads.c: the pool itself, the kernels' threaded
# matmuls and the forward pass's thread-count determinism.
TSAN_SUITES := test-threads test-kernels test-forward
tsan:
	$(MAKE) BUILD=build/tsan SAN=thread WERROR=$(WERROR) $(TSAN_SUITES:%=build/tsan/tests/%)
	@BUILD=build/tsan SUITES="$(TSAN_SUITES)" TSAN_OPTIONS="halt_on_error=1 $(TSAN_OPTIONS)" \
	  sh tests/run.sh

# The OpenMP build (build/omp) under the suites that run threads.c, then its logits and output
# against the default build's on the CLI (tests/openmp-match.sh): the same bits.
OMP_SUITES := test-threads test-kernels test-forward
omp-test: all
	$(MAKE) OPENMP=1 BUILD=build/omp WERROR=$(WERROR) build/omp/gemma3 $(OMP_SUITES:%=build/omp/tests/%)
	@BUILD=build/omp SUITES="$(OMP_SUITES) openmp-match.sh" G3_REF=build/gemma3 sh tests/run.sh

# Cross build for aarch64 (Debian: dpkg --add-architecture arm64, then apt-get install
# gcc-aarch64-linux-gnu qemu-user libcjson-dev:arm64), suites run under qemu-user. Only the
# library and the C suites are cross-built (no CLI, so no libedit); suites that run host tools
# (test-weights) or the CLI (tests/*.sh) stay native. qemu emulates floating point ~50x slower,
# so the two statistical sampling suites run their sanitizer-sized workloads (G3_TEST_QUICK,
# G3_EQUIV_VECTORS).
CROSS ?= aarch64-linux-gnu-
QEMU ?= qemu-aarch64
CROSS_SUITES := test-kernels test-threads test-tokenizer test-sampling test-sampling-equiv \
                test-sampling-gof test-config test-safetensors test-forward test-quant
cross-test:
	@command -v $(CROSS)gcc >/dev/null && command -v $(QEMU) >/dev/null && \
	  [ -f "$$($(CROSS)gcc -print-file-name=libcjson.so)" ] || \
	  { echo "cross-test: needs $(CROSS)gcc, $(QEMU) and libcjson-dev:arm64 (see the Makefile's cross-test comment)"; exit 1; }
	$(MAKE) BUILD=build/cross CC=$(CROSS)gcc CFLAGS="$(CFLAGS) -DG3_TEST_QUICK" WERROR=$(WERROR) \
	  $(CROSS_SUITES:%=build/cross/tests/%)
	@BUILD=build/cross SUITES="$(CROSS_SUITES)" RUNNER=$(QEMU) G3_EQUIV_VECTORS=100 sh tests/run.sh

# The pool against OpenMP with one compiler: build/omp-pool is the pool built by the OpenMP
# build's compiler (clang by default, whose code is not gcc's: compare the two builds only).
OMP_BENCH_BUILDS = $(MAKE) OPENMP=1 BUILD=build/omp build/omp/gemma3 && \
	$(MAKE) OPENMP=0 BUILD=build/omp-pool CC=$(OMP_CC) build/omp-pool/gemma3
bench: all
	$(OMP_BENCH_BUILDS)
	@POOL_BUILD=build/omp-pool OMP_BUILD=build/omp sh tools/bench.sh

bench-omp: $(BUILD)/tools/gen-checkpoint
	$(OMP_BENCH_BUILDS)
	@POOL_BUILD=build/omp-pool OMP_BUILD=build/omp sh tools/bench-omp.sh

# Fuzz targets: tests/fuzz-*.c, each defining LLVMFuzzerTestOneInput, built with clang.
FUZZ_SRCS := $(wildcard tests/fuzz-*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/%.c=build/fuzz/%)
FUZZ_SECONDS ?= 60
FUZZ_LIB_SRCS := $(filter util.c safetensors.c threads.c config.c tokenizer.c protobuf.c utf8.c \
                            chat.c sampling.c $(SAMPLING_SRCS) rng.c grammar.c json-schema.c,$(LIB_SRCS))
FUZZ_LIB_SRCS += kernels/cpu.c
FUZZ_LIB_SRCS += grammar-parse.c
FUZZ_LIB_SRCS += gguf.c outfile.c
# -fno-sanitize-recover: UBSan's reports otherwise leave the exit status 0, and a run that hit
# undefined behaviour would pass
build/fuzz/%: tests/%.c $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(STD) -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -o $@ $^ $(LDLIBS)
fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do \
	  name=$$(basename $$f); mkdir -p build/fuzz/corpus-$$name; \
	  seeds=tests/fuzz-seeds/$$name; [ -d $$seeds ] || seeds=; \
	  dict=tests/fuzz-seeds/$$name.dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
	  mkdir -p build/fuzz/artifacts; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -timeout=30 -artifact_prefix=build/fuzz/artifacts/$$name- \
	    -print_final_stats=1 $$dict build/fuzz/corpus-$$name $$seeds || exit 1; \
	done

mutation:
	@python3 tools/mutation.py $(MUTATIONS)

models: all
	@sh tools/make-models.sh

# The shared library: the library's sources again, position-independent, in BUILD/pic.
VERSION := $(shell sed -n 's/^\#define GEMMA3_VERSION "\(.*\)"/\1/p' gemma3.h)
SO_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SHLIB := $(BUILD)/libgemma3.so.$(VERSION)
PIC_OBJS := $(LIB_SRCS:%.c=$(BUILD)/pic/%.o)
$(BUILD)/pic/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c $< -o $@
$(SHLIB): $(PIC_OBJS)
	$(CC) $(CFLAGS) $(SAN_FLAGS) $(OMP_FLAGS) -shared -Wl,-soname,libgemma3.so.$(SO_MAJOR) \
	    -o $@ $^ $(LDLIBS)
shared: $(SHLIB)

PREFIX ?= /usr/local
INSTALLED := bin/gemma3 lib/libgemma3.a lib/libgemma3.so.$(VERSION) lib/libgemma3.so.$(SO_MAJOR) \
             lib/libgemma3.so include/gemma3.h lib/pkgconfig/gemma3.pc
install: $(BIN) $(LIB) $(SHLIB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gemma3
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libgemma3.a
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/libgemma3.so.$(VERSION)
	ln -sf libgemma3.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libgemma3.so.$(SO_MAJOR)
	ln -sf libgemma3.so.$(SO_MAJOR) $(DESTDIR)$(PREFIX)/lib/libgemma3.so
	install -m 644 gemma3.h $(DESTDIR)$(PREFIX)/include/gemma3.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' gemma3.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/gemma3.pc.tmp
	mv $(DESTDIR)$(PREFIX)/lib/pkgconfig/gemma3.pc.tmp $(DESTDIR)$(PREFIX)/lib/pkgconfig/gemma3.pc
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

clean:
	rm -rf build gemma3 libgemma3.a

-include $(LIB_OBJS:.o=.d) $(STATS_OBJS:.o=.d) $(PIC_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d) $(TOOL_BINS:=.d)
