# Distributed training from scratch, in C: build, run, tour, test.
#
#   make                 build every lesson (BACKEND=auto: cuda if nvcc and a GPU, else cpu)
#   make lesson-3        build one lesson          make run-3 NP=4 ARGS="--max-bytes 1M"
#   make tour            run every lesson at NP=4  make test    the whole test suite
#   make test-cluster    every lesson across emulated nodes (make bench-cluster: a slow link)
#   make test-boundary   every lesson's suite with the cpu holding device memory out of the host's reach
#   make setup           install Open MPI, OpenBLAS (and gnuplot: apt-get through sudo; Homebrew on macOS)
#   make gpu-node-kit    pack Open MPI into .gpu-kit/ for a GPU machine without network
#   make gpu-check       on a GPU machine: 10-14 and the cuda backend, checked (no GPU: a dry run)
#   make exercise-5      a classroom exercise      make check-5 [NP=k]   check it
#   make data            the tiny Shakespeare text for 14_gpt (data/shakespeare.txt, checked)
#   make grade DIR=d     check every exercise in d: a table and Gradescope results.json
#
# Variables: BACKEND=auto|cpu|cuda NP MPIRUN ARGS CUDA_HOME NCCL_HOME MPI_HOME ARCH
.DEFAULT_GOAL := all
.SECONDARY: # keep intermediate objects: no "rm" after the test summary, no rebuilds
SHELL := /bin/bash

BACKEND   ?= auto
NP        ?= 4
ARGS      ?=
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?=
MPI_HOME  ?=
ARCH      ?= 80 90
MPIRUN    ?= $(if $(MPI_HOME),$(MPI_HOME)/bin/mpirun,mpirun)

# ---- what this machine has -------------------------------------------------
NVCC := $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
GPUS := $(shell nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# online cores: getconf is POSIX (Linux, macOS), sysctl the BSD way; nproc is GNU
CORES := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1)
UNAME := $(shell uname -s)
BREW  := $(shell command -v brew 2>/dev/null)

ifeq ($(BACKEND),auto)
  override BACKEND := $(if $(and $(NVCC),$(filter-out 0,$(GPUS))),cuda,cpu)
endif
ifeq ($(filter cpu cuda,$(BACKEND)),)
  $(error BACKEND must be auto, cpu or cuda, not '$(BACKEND)')
endif

# The cpu backend needs OpenBLAS (cblas.h); the cuda backend only cuBLAS.
# Homebrew's Open MPI is on PATH; its OpenBLAS is keg-only (cblas.h is not on
# the default include path), so: the compiler's own paths (Linux packages),
# else pkg-config, else brew --prefix. BLAS_CFLAGS/BLAS_LIBS override.
find_mpicc = $(if $(MPI_HOME),$(wildcard $(MPI_HOME)/bin/mpicc),$(or $(shell command -v mpicc 2>/dev/null),$(if $(BREW),$(wildcard $(shell $(BREW) --prefix open-mpi 2>/dev/null)/bin/mpicc))))
MPICC := $(find_mpicc)
# an mpicc found by brew --prefix, not on PATH: its mpirun, not another one
ifeq ($(MPI_HOME)$(shell command -v mpicc 2>/dev/null),)
  MPIRUN := $(if $(MPICC),$(dir $(MPICC))mpirun,$(MPIRUN))
endif
# '#' through a variable: inside a function call make >= 4.3 keeps the '\' of
# '\#' (the shell then saw '\#include', and any compiler "found" cblas.h)
HASH := \#
cblas_ok = $(shell echo '$(HASH)include <cblas.h>' | cc $(1) -E -x c - >/dev/null 2>&1 && echo yes)
find_blas = $(strip $(if $(call cblas_ok,),default,\
  $(if $(shell pkg-config --exists openblas 2>/dev/null && echo y),pkg-config,\
  $(if $(BREW),$(if $(wildcard $(shell $(BREW) --prefix openblas 2>/dev/null)/include/cblas.h),brew)))))
blas_cflags = $(if $(filter pkg-config,$(1)),$(shell pkg-config --cflags openblas),$(if $(filter brew,$(1)),-I$(shell $(BREW) --prefix openblas)/include))
blas_libs = $(if $(filter pkg-config,$(1)),$(shell pkg-config --libs openblas),$(if $(filter brew,$(1)),-L$(shell $(BREW) --prefix openblas)/lib -lopenblas,-lopenblas))
ifeq ($(BACKEND),cpu)
  BLAS_FROM   := $(if $(BLAS_CFLAGS)$(BLAS_LIBS),BLAS_CFLAGS/BLAS_LIBS,$(find_blas))
  BLAS_CFLAGS ?= $(call blas_cflags,$(BLAS_FROM))
  BLAS_LIBS   ?= $(call blas_libs,$(BLAS_FROM))
  HAVE_CBLAS  := $(call cblas_ok,$(BLAS_CFLAGS))
else
  HAVE_CBLAS  := not needed
endif
NO_MPI_GOALS := setup clean help gpu-node-kit test-gpu-node-kit test-arm64 gpu-check
ifeq ($(and $(MPICC),$(HAVE_CBLAS)),)
ifneq ($(filter-out $(NO_MPI_GOALS),$(or $(MAKECMDGOALS),all)),)
$(info mpicc or cblas.h not found: running 'make setup' to install Open MPI and OpenBLAS first)
SETUP_STATUS := $(shell $(MAKE) --no-print-directory setup >&2; echo $$?)
MPICC := $(find_mpicc)
$(if $(MPICC),,$(error 'make setup' did not provide mpicc; install Open MPI (openmpi-bin libopenmpi-dev) and retry$(if $(MPI_HOME), or fix MPI_HOME=$(MPI_HOME))))
ifeq ($(BACKEND),cpu)
  BLAS_FROM   := $(find_blas)
  BLAS_CFLAGS := $(call blas_cflags,$(BLAS_FROM))
  BLAS_LIBS   := $(call blas_libs,$(BLAS_FROM))
  $(if $(call cblas_ok,$(BLAS_CFLAGS)),,$(error 'make setup' did not provide cblas.h; install OpenBLAS and retry, or set BLAS_CFLAGS=-I<dir of cblas.h> BLAS_LIBS="-L<dir> -lopenblas"))
endif
endif
endif

ifeq ($(BACKEND),cuda)
  ifeq ($(NVCC),)
    $(error BACKEND=cuda needs nvcc: set CUDA_HOME (now $(CUDA_HOME)))
  endif
endif
# NCCL: NCCL_HOME, else pip's nvidia-nccl-cu* of python3, else the system
# (tools/find_nccl.sh); looked for only where nvcc is.
NCCL_FOUND := $(if $(NVCC),$(shell CUDA_HOME=$(CUDA_HOME) NCCL_HOME=$(NCCL_HOME) bash tools/find_nccl.sh 2>/dev/null))
NCCL_INC := $(word 1,$(NCCL_FOUND))
NCCL_LIB := $(word 2,$(NCCL_FOUND))
NCCL_FROM := $(wordlist 3,99,$(NCCL_FOUND))
NCCL_VERSION := $(word 2,$(NCCL_FROM))
ifeq ($(BACKEND),cuda)
  ifeq ($(NCCL_FOUND),)
    $(error $(shell CUDA_HOME=$(CUDA_HOME) NCCL_HOME=$(NCCL_HOME) bash tools/find_nccl.sh 2>&1 >/dev/null))
  endif
endif

# ---- flags ------------------------------------------------------------------
BUILD_ROOT ?= build
BUILD   := $(BUILD_ROOT)/$(BACKEND)
# -O3 vectorizes the elementwise loops (ReLU, optimizers); -funroll-loops
# speeds the SGD pass further: `make bench-flags` measures each candidate.
OPT     ?= -O3 -funroll-loops -g
CFLAGS  := $(OPT) -std=c11 -Wall -Wextra -I. -Icommon/comm -Icommon/train -Itests $(BLAS_CFLAGS) -MMD -MP
LDLIBS  := $(if $(filter cpu,$(BACKEND)),$(BLAS_LIBS) -rdynamic) -lm -pthread
# common/ in two layers, two libraries: comm (what lessons 01-04 need) and
# train above it (05-09). A lesson links train first: train calls into comm.
COMM_SRC  := $(filter-out %/kernels_cpu.c,$(wildcard common/comm/*.c))
TRAIN_SRC := $(filter-out %/kernels_cpu.c,$(wildcard common/train/*.c))
ifeq ($(BACKEND),cuda)
  CFLAGS  += -DDT_CUDA -I$(CUDA_HOME)/include -I$(NCCL_INC)
  # sm_XX machine code for each ARCH, and PTX of the newest, which the driver
  # compiles (JIT) for a GPU newer than all of them.
  PTX_ARCH := $(shell printf '%s\n' $(ARCH) | sort -n | tail -n 1)
  NVFLAGS := -O2 -g -std=c++17 -DDT_CUDA -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Icommon/comm -Icommon/train -I$(NCCL_INC) \
             $(addprefix -I,$(shell $(MPICC) --showme:incdirs 2>/dev/null)) \
             $(foreach a,$(ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(PTX_ARCH),code=compute_$(PTX_ARCH) \
             -Xcompiler -Wall,-Wextra -MMD -MP
  # -l:libnccl.so.2, the SONAME: pip's wheel ships no unversioned libnccl.so.
  # NCCL's folder first, in -L and rpath: a CUDA tree may hold another NCCL.
  LDLIBS  += -L$(NCCL_LIB) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(NCCL_LIB) \
             -Wl,-rpath,$(CUDA_HOME)/lib64 -l:libnccl.so.2 -lcublas -lcudart -lstdc++
  KERNELS := kernels.o # from kernels.cu; kernels_cpu.c is the cpu backend's
  # attention's tiles and the router on the GPU; on the cpu, attention.c's and moe.c's
  TRAIN_CUDA := $(BUILD)/common/train/attention_kernels.o $(BUILD)/common/train/moe_kernels.o
else
  KERNELS := kernels_cpu.o
endif
# The cpu kernels' sqrtf need not set errno (nothing reads it): with errno,
# gcc keeps AdamW's loop scalar around a libm call for negative inputs, and on
# 10_ep's larger models the optimizer took more time than every GEMM. Packed
# or not, IEEE sqrt and division round alike: the same bits, only sooner.
$(BUILD)/common/train/kernels_cpu.o: CFLAGS += -fno-math-errno
# Comparisons that may not trap: without it gcc will not turn attention's
# clamps into vector selects, and its exponentials stay scalar (4x slower).
$(BUILD)/common/train/attention.o: CFLAGS += -fno-trapping-math
COMM_OBJ  := $(COMM_SRC:%.c=$(BUILD)/%.o) $(BUILD)/common/comm/$(KERNELS)
TRAIN_OBJ := $(TRAIN_SRC:%.c=$(BUILD)/%.o) $(BUILD)/common/train/$(KERNELS) $(TRAIN_CUDA)
LIBCOMM   := $(BUILD)/libdtcomm.a
LIBTRAIN  := $(BUILD)/libdttrain.a
LIBS      := $(LIBTRAIN) $(LIBCOMM)

# ---- lessons: NN_name/name.c -> NN_name/name ---------------------------------
# Any folder NN_name/ (two digits) is a lesson. Its binary links every .c of
# the folder (name.c holds main; the others are its extensions) and the
# pieces of other lessons it includes as "NN_other/piece.h" (piece.c beside).
# A lesson whose program is a tool around it (13_plan: the cost model, its
# command line in tools/plan/) also links tools/name/*.c, main there.
LESSON_DIRS := $(patsubst %/,%,$(sort $(dir $(wildcard [0-9][0-9]_*/*.c))))
lesson_name  = $(patsubst $(firstword $(subst _, ,$(1)))_%,%,$(1))
lesson_srcs  = $(wildcard $(1)/*.c tools/$(call lesson_name,$(1))/*.c)
lesson_uses  = $(wildcard $(patsubst %.h,%.c,$(shell sed -n 's|^\#include "\([0-9][0-9]_[^/"]*/[^"]*\.h\)".*|\1|p' $(call lesson_srcs,$(1)))))
lesson_objs  = $(patsubst %.c,$(BUILD)/%.o,$(sort $(call lesson_srcs,$(1)) $(call lesson_uses,$(1))))
BIN_DIR     ?= .
lesson_bin   = $(BIN_DIR)/$(1)/$(call lesson_name,$(1))
lesson_num   = $(patsubst 0%,%,$(firstword $(subst _, ,$(1))))
LESSON_BINS := $(foreach d,$(LESSON_DIRS),$(call lesson_bin,$(d)))
TEST_BINS   := $(patsubst %.c,$(BIN_DIR)/%,$(wildcard tests/test_*.c))
# tests/gpt_run.c: the GPT of common/train through dt_run in one process, a
# harness (tests/suite_gpt.sh, bench/torch_gpt.py), not a unit test
TOOL_BINS   := $(patsubst %.c,$(BIN_DIR)/%,$(wildcard tests/gpt_run.c))

# A binary remembers nothing about its backend, so switching BACKEND must
# relink: every binary depends on this file, rewritten only on a switch.
STAMP := $(BUILD_ROOT)/last-backend
$(shell mkdir -p $(BUILD_ROOT); [ "$$(cat $(STAMP) 2>/dev/null)" = "$(BACKEND)" ] || echo $(BACKEND) > $(STAMP))

# mpirun as root needs --allow-run-as-root; more ranks than cores needs
# --oversubscribe (Open MPI refuses otherwise). See README "Running by hand".
mpirun_flags = $(if $(filter 0,$(shell id -u)),--allow-run-as-root) $(if $(shell [ $(1) -gt $(CORES) ] && echo y),--oversubscribe)

.PHONY: all banner setup clean test tour help sanitize bench-matmul $(foreach d,$(LESSON_DIRS),lesson-$(call lesson_num,$(d)) run-$(call lesson_num,$(d)))

all: banner $(LESSON_BINS) $(TEST_BINS) $(TOOL_BINS)

banner:
	@echo "make: backend=$(BACKEND) mpicc=$(or $(MPICC),none) nvcc=$(or $(NVCC),none) nccl=$(or $(NCCL_VERSION),none) gpus=$(GPUS) cores=$(CORES)"
	@$(if $(filter cuda,$(BACKEND)),echo "make: $(NCCL_FROM) (nccl.h in $(NCCL_INC); links $(NCCL_LIB)/libnccl.so.2)",:)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(LIBCOMM): $(COMM_OBJ)
	$(AR) rcs $@ $^
$(LIBTRAIN): $(TRAIN_OBJ)
	$(AR) rcs $@ $^

define lesson_rules
lesson-$(call lesson_num,$(1)): banner $(call lesson_bin,$(1))
$(call lesson_bin,$(1)): $(call lesson_objs,$(1)) $(LIBS) $(STAMP)
	@mkdir -p $$(@D)
	$(MPICC) $(LDFLAGS) $$(filter %.o %.a,$$^) -o $$@ $(LDLIBS)
run-$(call lesson_num,$(1)): $(call lesson_bin,$(1))
	$(MPIRUN) $$(call mpirun_flags,$(NP)) -np $(NP) $(call lesson_bin,$(1)) $(ARGS)
endef
$(foreach d,$(LESSON_DIRS),$(eval $(call lesson_rules,$(d))))

$(BIN_DIR)/tests/test_%: $(BUILD)/tests/test_%.o $(LIBS) $(STAMP)
	@mkdir -p $(@D)
	$(MPICC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS)
$(TOOL_BINS): $(BIN_DIR)/tests/%: $(BUILD)/tests/%.o $(LIBS) $(STAMP)
	@mkdir -p $(@D)
	$(MPICC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS)

# 10_ep's hand all-to-all (exchange.c) timed beside the library's: a
# benchmark, not a test, so only `make bench` builds it (bench/ep.sh).
A2A_BENCH := $(BUILD)/bench_all_to_all
$(A2A_BENCH): $(BUILD)/tests/bench_all_to_all.o $(BUILD)/10_ep/exchange.o $(LIBS) $(STAMP)
	$(MPICC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS)
# The library's all-gather at one size (what gathering 14_gpt's logits would
# cost): a benchmark, built by `make bench-vocab` alone (bench/vocab.sh).
AG_BENCH := $(BUILD)/bench_all_gather
$(AG_BENCH): $(BUILD)/tests/bench_all_gather.o $(LIBS) $(STAMP)
	$(MPICC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@ $(LDLIBS)

# The tiny Shakespeare text for 14_gpt, its size and SHA-256 checked
# (tools/data.sh); offline it says how to train on any text with --text.
# make test never needs it.
.PHONY: data
data:
	@bash tools/data.sh

tour: all
	@NP=$(NP) MPIRUN="$(MPIRUN)" MPIRUN_FLAGS="$(call mpirun_flags,$(NP))" bash tests/tour.sh $(LESSON_BINS)

test: all
	@BACKEND=$(BACKEND) NVCC="$(NVCC)" GPUS=$(GPUS) CORES=$(CORES) MPIRUN="$(MPIRUN)" MPICC="$(MPICC)" \
	  BLAS_CFLAGS="$(BLAS_CFLAGS)" BLAS_LIBS="$(BLAS_LIBS)" MAKE="$(MAKE)" bash tests/run_tests.sh

# Every lesson's suite but 13's in the cpu backend's device-boundary mode
# (tests/run_boundary.sh, docs/gpu.md): make test runs each lesson's tour and
# its variations in it (tests/suite_boundary.sh); this runs all of the
# suites' checks so (about 10 minutes here).
.PHONY: test-boundary
test-boundary: all
	@BACKEND=$(BACKEND) CORES=$(CORES) MPIRUN="$(MPIRUN)" MPICC="$(MPICC)" MAKE="$(MAKE)" \
	  bash tests/run_boundary.sh

# ARM64 Linux emulated here (tests/run_arm64.sh): a Debian arm64 root by
# debootstrap run through qemu-user-static, the project built inside with its
# GCC, every lesson at NP 2 and 4, the kernel x seed matrix over OpenBLAS's
# ARM kernels. Needs root; skipped (exit 77, the reason printed) where binfmt
# cannot be enabled. Not in make test: it takes long (docs/platforms.md).
.PHONY: test-arm64
test-arm64:
	@bash tests/run_arm64.sh || [ $$? -eq 77 ]

# Every lesson across emulated nodes (tools/cluster.sh: network namespaces,
# or loopback nodes where the machine forbids them): every lesson on 2 nodes x 2
# ranks, 03 and 05 also round-robin, split 2 + 1 and on 3 nodes x 1 rank.
# make test runs it too (tests/suite_cluster.sh); this target runs it alone.
.PHONY: test-cluster bench-cluster
test-cluster: all
	@bash tests/run_cluster.sh

# Flat vs hierarchical all-reduce (03) and 05_dp's step time on a shaped
# link between emulated nodes (tc tbf); writes bench/cluster.md.
bench-cluster: all
	@bash bench/cluster.sh || [ $$? -eq 77 ] # 77: skipped, the reason printed

# The cpu backend under AddressSanitizer and UndefinedBehaviorSanitizer, in
# its own folders, then every lesson at NP=2 and NP=4: any report fails.
SANITIZE_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
sanitize:
	@$(MAKE) --no-print-directory BACKEND=cpu BUILD_ROOT=build/sanitize BIN_DIR=build/sanitize/bin \
	  OPT="$(SANITIZE_FLAGS)" LDFLAGS="$(SANITIZE_FLAGS)" all
	@CORES=$(CORES) MPIRUN="$(MPIRUN)" bash tests/sanitize.sh build/sanitize/bin

# The readers of files from disk (safetensors, the checkpoint manifest)
# under ASan+UBSan: tests/fuzz_NAME.c holds each harness, tests/fuzz/corpus/
# NAME/ its committed inputs. make fuzz runs libFuzzer (clang) on each for
# FUZZ_SECONDS; make test replays the corpus through tests/fuzz/replay.c
# with this compiler, no libFuzzer needed. Only the readers and the harness
# are instrumented; the rest of common links from the normal build.
FUZZ_SECONDS ?= 300
FUZZ_CC      ?= clang
FUZZ_DIR     := $(BUILD_ROOT)/fuzz
FUZZ_NAMES   := safetensors manifest
FUZZ_READERS := common/train/safetensors.c common/train/checkpoint.c
FUZZ_CFLAGS   = $(filter-out -MMD -MP,$(CFLAGS)) $(SANITIZE_FLAGS)
.PHONY: fuzz fuzz-replay
$(FUZZ_DIR)/replay_%: tests/fuzz_%.c tests/fuzz/replay.c $(FUZZ_READERS) $(LIBS)
	@mkdir -p $(@D)
	$(MPICC) $(FUZZ_CFLAGS) $(filter %.c,$^) $(LIBS) -o $@ $(LDLIBS)
# OMPI_CC / MPICH_CC: mpicc's flags and libraries, clang as the compiler
$(FUZZ_DIR)/fuzz_%: tests/fuzz_%.c $(FUZZ_READERS) $(LIBS)
	@mkdir -p $(@D)
	OMPI_CC=$(FUZZ_CC) MPICH_CC=$(FUZZ_CC) $(MPICC) $(FUZZ_CFLAGS) -fsanitize=fuzzer \
	  $(filter %.c,$^) $(LIBS) -o $@ $(LDLIBS)
fuzz-replay: $(foreach n,$(FUZZ_NAMES),$(FUZZ_DIR)/replay_$(n))
	@for n in $(FUZZ_NAMES); do $(FUZZ_DIR)/replay_$$n tests/fuzz/corpus/$$n || exit 1; done
fuzz:
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz: needs clang with libFuzzer (FUZZ_CC=$(FUZZ_CC) not found)"; exit 1; }
	@$(MAKE) --no-print-directory $(foreach n,$(FUZZ_NAMES),$(FUZZ_DIR)/fuzz_$(n))
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_DIR) $(FUZZ_NAMES)

# dt_matmul against a standalone single-thread OpenBLAS sgemm on the
# training shapes (the cpu backend's performance target: >= 80%).
bench-matmul:
	@$(MAKE) --no-print-directory BACKEND=cpu build/cpu/libdttrain.a build/cpu/libdtcomm.a
	$(MPICC) $(CFLAGS) tests/bench_matmul.c build/cpu/libdttrain.a build/cpu/libdtcomm.a -o build/cpu/bench_matmul $(LDLIBS)
	./build/cpu/bench_matmul

# The benchmark suite (bench/run.sh): collectives of lessons 01-03 against the
# library, every training lesson at NP=1,2,4 (strong and weak scaling), memory
# per rank by strategy, 10_ep's all-to-alls and step (bench/ep.sh). Writes
# bench/results.md, bench/*.csv, and bench/*.png when gnuplot is installed
# (optional).
# `make bench-quick` (or `make bench QUICK=1`): the same nine parts, each at
# small sizes and counts, written to bench/out/quick/results/ (never over
# bench/'s figures).
.PHONY: bench bench-quick
bench: all $(A2A_BENCH)
	@BENCH_QUICK=$(QUICK) BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" NCCL_VERSION=$(NCCL_VERSION) A2A_BIN=$(A2A_BENCH) bash bench/run.sh
bench-quick:
	@$(MAKE) --no-print-directory bench QUICK=1

# Lesson 10_ep's part of `make bench` alone (bench/ep.sh): the hand and the
# library all-to-all, 1 KiB to 64 MiB at NP=2 and 4; the step at NP=1 beside
# the same model in PyTorch; a --save read by PyTorch. Writes bench/ep.md,
# bench/all_to_all.csv, bench/ep_step.csv, and its section of results.md.
.PHONY: bench-ep
bench-ep: all $(A2A_BENCH)
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" A2A_BIN=$(A2A_BENCH) bash bench/ep.sh

# 10_ep's default over 10,000 steps at NP 1, 2 and 4 beside the rates that
# diverged (bench/ep_stability.sh): the task loss at milestones, where a run
# diverged; fails unless the default trains on. Writes bench/ep_stability.md.
.PHONY: bench-ep-stability
bench-ep-stability: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/ep_stability.sh

# Lesson 11's part of make bench alone (bench/cp.sh): ring attention (both
# splits) and Ulysses at S 1k-16k, NP 2 and 4; at NP=1 beside PyTorch's
# explicit softmax(QK^T)V. Writes bench/out/cp/cp.md and cp.csv.
.PHONY: bench-cp
bench-cp: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/cp.sh

# Lesson 12's bench (bench/mesh.sh): every mesh of 8 ranks on one model
# (step time, bytes per axis, memory, bubble), then tensor parallelism inside
# a node against across the link of emulated nodes. Writes bench/mesh.md,
# bench/mesh.csv, bench/mesh_cluster.csv (and bench/mesh.png with gnuplot).
# Lesson 14's bench (bench/gpt.sh): nanoGPT's CPU configuration on the tiny
# Shakespeare text (make data; else README.md) at NP 1, 2 and 16 beside the
# same run in PyTorch; BENCH_GPT_ITERS=40 for a quick look. Writes
# bench/out/gpt/gpt.md, gpt.csv and gpt.png.
.PHONY: bench-gpt
bench-gpt: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/gpt.sh

# Lesson 14's vocabulary parallelism measured (bench/vocab.sh): 14_gpt at
# V = 4,096 and 16,384 (--tokens bpe:N) at tp 1, 2, 4: the logits' memory per
# rank, what gathering them would cost (bench_all_gather at that size), the
# loss's all-reduces, the validation loss in bits per byte against the
# characters'. Writes bench/vocab.md (and bench/vocab.png with gnuplot).
.PHONY: bench-vocab
bench-vocab: all $(AG_BENCH)
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" AG_BIN=$(AG_BENCH) bash bench/vocab.sh

# The pipeline's schedules (bench/pp.sh; not in make bench): GPipe, 1F1B,
# interleaved V 2 and 4, ZB-H1 at M 4, 8, 16, in 09 at NP 4 and on 12's
# 16-rank mesh: the step, the bubble measured beside each formula and the
# plan's. Writes bench/pp.md (and bench/pp.png with gnuplot).
.PHONY: bench-pp
bench-pp: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/pp.sh

.PHONY: bench-mesh
bench-mesh: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/mesh.sh

# The self-check at bench's model sizes on every OpenBLAS kernel the CPU runs
# (bench/check.sh): 05-12 at NP 2 and 4, seeds 1-3, both optimizers; every run
# must pass, ReLU's decisions near 0 replayed. Writes bench/check.md.
.PHONY: bench-check
bench-check: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" BLAS_CFLAGS="$(BLAS_CFLAGS)" BLAS_LIBS="$(BLAS_LIBS)" bash bench/check.sh

# The elementwise work of a 05_dp step (tests/bench_elementwise.c) with common
# built at each candidate OPT, three rounds interleaved: how OPT was chosen.
BENCH_FLAGS ?= -O2 -g|-O3 -g|-O3 -funroll-loops -g
.PHONY: bench-flags
bench-flags:
	@flags='$(BENCH_FLAGS)'; IFS='|' read -ra opts <<<"$$flags"; \
	for i in $${!opts[@]}; do o=$${opts[$$i]}; \
	  $(MAKE) --no-print-directory -s BACKEND=cpu BUILD_ROOT=build/flags$$i OPT="$$o" build/flags$$i/cpu/libdttrain.a build/flags$$i/cpu/libdtcomm.a && \
	  $(MPICC) $$o -std=c11 -Wall -Wextra -Icommon/comm -Icommon/train tests/bench_elementwise.c \
	    build/flags$$i/cpu/libdttrain.a build/flags$$i/cpu/libdtcomm.a \
	    -o build/flags$$i/bench_elementwise $(LDLIBS) || exit 1; done; \
	for r in 1 2 3; do for i in $${!opts[@]}; do \
	  printf '%-30s ' "OPT=\"$${opts[$$i]}\""; ./build/flags$$i/bench_elementwise || exit 1; done; done

# 05_dp's training step against the same model in PyTorch (bench/step.sh):
# NP=1 against one process, NP=2 against DDP over gloo, several interleaved
# runs, min and median, the ratios and the GEMM floor (time in dt_matmul).
.PHONY: bench-step
bench-step: all
	@BIN_DIR=$(BIN_DIR) CORES=$(CORES) MPIRUN="$(MPIRUN)" bash bench/step.sh

# Classroom exercises (TEACHING.md): make exercise-N writes exercises/NN_name/
# name.c, the lesson with its marked concept cut out and a TODO in its place;
# make check-N builds that file and runs the lesson's checks at several NP.
# A lesson's second exercise, tests/exercises/NN_name-PART.txt (its markers in
# NN_name/PART.c): make exercise-N-PART and make check-N-PART.
EXERCISE_PARTS := $(patsubst tests/exercises/%.txt,%,$(wildcard tests/exercises/[0-9][0-9]_*-*.txt))
part_dir = $(firstword $(subst -, ,$(1)))
part_id  = $(call lesson_num,$(call part_dir,$(1)))-$(lastword $(subst -, ,$(1)))
EXERCISE_IDS := $(foreach d,$(LESSON_DIRS),$(call lesson_num,$(d))) $(foreach p,$(EXERCISE_PARTS),$(call part_id,$(p)))
.PHONY: $(foreach i,$(EXERCISE_IDS),exercise-$(i) check-$(i))
# The student's file replaces name.c alone: the lesson's other .c files and
# the pieces of other lessons it includes are linked as the lesson links them.
.PHONY: $(foreach d,$(LESSON_DIRS),print-lesson-objs-$(call lesson_num,$(d)))
# exercise_rules DIR ID: make exercise-ID and check-ID on lesson DIR
define exercise_rules
exercise-$(2):
	@bash tests/exercise.sh make $(2)
check-$(2):
	@MPICC="$(MPICC)" CFLAGS="$(CFLAGS)" LDFLAGS="$(LDFLAGS)" LDLIBS="$(LDLIBS)" LIBDT="$(LIBS)" \
	  LESSON_OBJS="$(call lesson_objs,$(1))" OBJDIR=$(BUILD)/exercises MPIRUN="$(MPIRUN)" CORES=$(CORES) \
	  MAKE="$(MAKE)" MAKE_ARGS="BACKEND=$(BACKEND)" $(if $(filter command line environment,$(origin NP)),CHECK_NP=$(NP)) \
	  bash tests/exercise.sh check $(2)
endef
define objs_rule
print-lesson-objs-$(call lesson_num,$(1)):
	@echo $(call lesson_objs,$(1))
endef
$(foreach d,$(LESSON_DIRS),$(eval $(call exercise_rules,$(d),$(call lesson_num,$(d))))$(eval $(call objs_rule,$(d))))
$(foreach p,$(EXERCISE_PARTS),$(eval $(call exercise_rules,$(call part_dir,$(p)),$(call part_id,$(p)))))
# make grade DIR=exercises/alice: every exercise in the folder, a summary
# table and Gradescope's results.json (RESULTS=path; TEACHING.md, "Grading").
.PHONY: grade
grade:
	@MAKE="$(MAKE)" bash tests/grade.sh "$(DIR)"

# A GPU machine without network (docs/gpu.md, "Running on a GPU node"): pack
# .gpu-kit/ here (Open MPI from PyPI), copy it along, and begin each command
# there with 'source tools/gpu-node/env.sh &&'. test-gpu-node-kit packs it and
# checks it here with the system's Open MPI hidden (downloads: not in make test).
.PHONY: gpu-node-kit test-gpu-node-kit
gpu-node-kit:
	@bash tools/gpu-node/pack.sh
test-gpu-node-kit: gpu-node-kit
	@CORES=$(CORES) bash tools/gpu-node/test_kit.sh

# What a GPU must show, in one command (docs/gpu.md, "make gpu-check"): the
# cuda build, its unit tests, the tour at NP 1 and 2, lessons 10-14 at their
# variants with the check, compute-sanitizer on 11 and 14; logs and a
# summary in GPU_CHECK_DIR. Where no GPU is, a dry run: what it would run.
GPU_CHECK_DIR ?= build/gpu-check
.PHONY: gpu-check
gpu-check:
	@bash tools/gpu-node/check.sh $(GPU_CHECK_DIR)

# apt-get and Homebrew are run; other package managers are named, with the
# command (Fedora's Open MPI is a module: its mpicc is not on PATH by itself).
setup:
	@if [ "$(UNAME)" = Darwin ]; then \
	  if [ -z "$(BREW)" ]; then echo "setup: macOS needs Homebrew (https://brew.sh), then: brew install open-mpi openblas" >&2; exit 1; fi; \
	  echo "setup: installing Open MPI and OpenBLAS with Homebrew"; \
	  brew install open-mpi openblas && echo "setup: done"; exit; \
	fi; \
	if command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "setup: installing Open MPI, OpenBLAS and gnuplot (make bench's plots) with apt-get"; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openmpi-bin libopenmpi-dev libopenblas-dev gnuplot-nox >/dev/null && echo "setup: done"; \
	elif command -v dnf >/dev/null 2>&1; then \
	  echo "setup: with dnf, install them yourself, then retry:" >&2; \
	  echo "  sudo dnf install openmpi-devel openblas-devel && module load mpi/openmpi-$$(uname -m)" >&2; exit 1; \
	elif command -v pacman >/dev/null 2>&1; then \
	  echo "setup: with pacman, install them yourself, then retry:" >&2; \
	  echo "  sudo pacman -S --needed openmpi openblas" >&2; exit 1; \
	else \
	  echo "setup: no apt-get, dnf, pacman or Homebrew here: install Open MPI (mpicc, mpirun) and OpenBLAS (cblas.h, libopenblas)" >&2; exit 1; \
	fi

clean:
	rm -rf build $(foreach d,$(LESSON_DIRS),$(call lesson_bin,$(d))) $(patsubst tests/%.c,tests/%,$(wildcard tests/test_*.c)) tests/gpt_run

help:
	@sed -n '2,15p' Makefile | sed 's/^# \{0,1\}//'

-include $(shell find $(BUILD_ROOT) -name '*.d' -type f 2>/dev/null)
