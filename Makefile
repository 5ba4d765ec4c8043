# gemma3 - CPU inference for Gemma 3.  `make` builds ./gemma3 and libgemma3.a.
#
#   make            the gemma3 command, libgemma3.a and the tools in build/
#   make test       every test suite (tests/run.sh); ends with "N passed, N failed"
#   make asan       the same suites built with address + undefined-behaviour sanitizers
#   make bench      benchmarks (tok/s, MB/s, sampler time), printed as tables
#   make fuzz       libFuzzer targets (clang); FUZZ_SECONDS per target
#   make models     the bundled small synthetic checkpoint in models/
#   make clean
#
# One portable binary: no -march=native. SIMD kernels carry per-function target attributes and
# are picked at run time from cpuid.

CC ?= cc
OPT ?= -O2
CFLAGS ?= $(OPT) -g
WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror
STD := -std=c11 -D_GNU_SOURCE
DEPFLAGS = -MMD -MP
SAN_FLAGS :=
BUILD ?= build
LDLIBS := -lcjson -lm -lpthread
EDIT_LIBS := -ledit

ifeq ($(SAN),1)
  SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  OPT := -O1
endif

ALL_CFLAGS = $(STD) $(CFLAGS) $(WARN) $(SAN_FLAGS) $(DEPFLAGS) -I.

LIB_SRCS := $(wildcard util.c safetensors.c config.c weights.c gemma3.c kernels.c threads.c \
                       tokenizer.c protobuf.c utf8.c chat.c sampling.c sampling-select.c rng.c quant.c)
CLI_SRCS := $(wildcard main.c cli.c cli-*.c)
TEST_SRCS := $(wildcard tests/test-*.c)
TOOL_SRCS := $(wildcard tools/*.c)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TOOL_BINS := $(TOOL_SRCS:tools/%.c=$(BUILD)/tools/%)
LIB := $(BUILD)/libgemma3.a
BIN := $(BUILD)/gemma3

.PHONY: all test asan bench fuzz models clean

all: $(BIN) $(LIB) $(TOOL_BINS)
ifeq ($(BUILD),build)
	@cp $(BIN) gemma3 && cp $(LIB) libgemma3.a
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJS) $(LIB)
	$(CC) $(CFLAGS) $(SAN_FLAGS) -o $@ $(CLI_OBJS) $(LIB) $(LDLIBS) $(EDIT_LIBS)

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/tools/%: tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

test: all $(TEST_BINS)
	@BUILD=$(BUILD) sh tests/run.sh

asan:
	$(MAKE) BUILD=build/asan SAN=1 test

bench: all
	@sh tools/bench.sh

# Fuzz targets: tests/fuzz-*.c, each defining LLVMFuzzerTestOneInput, built with clang.
FUZZ_SRCS := $(wildcard tests/fuzz-*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/%.c=build/fuzz/%)
FUZZ_SECONDS ?= 60
FUZZ_LIB_SRCS := $(filter util.c safetensors.c config.c tokenizer.c protobuf.c utf8.c chat.c sampling.c sampling-select.c rng.c,$(LIB_SRCS))
build/fuzz/%: tests/%.c $(FUZZ_LIB_SRCS)
	@mkdir -p $(dir $@)
	clang $(STD) -O1 -g -I. -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)
fuzz: $(FUZZ_BINS)
	@for f in $(FUZZ_BINS); do \
	  name=$$(basename $$f); mkdir -p build/fuzz/corpus-$$name; \
	  seeds=tests/fuzz-seeds/$$name; [ -d $$seeds ] || seeds=; \
	  dict=tests/fuzz-seeds/$$name.dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $$dict build/fuzz/corpus-$$name $$seeds || exit 1; \
	done

models: all
	@sh tools/make-models.sh

clean:
	rm -rf build gemma3 libgemma3.a

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d)
