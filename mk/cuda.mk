# CUDA targets (owned by backends/cuda; see docs/cuda.md).
#
#   make cuda        build bin/qppl-cuda with the CUDA backend: kernel
#                    fatbins compiled first and embedded; the driver binding
#                    is picked from the toolkit (CUDA_BINDING below)
#   make cuda-check  no GPU needed, installs nothing: compile every kernel
#                    into fatbins (SASS sm_80, sm_90 [, sm_100, sm_120] +
#                    compute_90 PTX), validate the PTX with ptxas, prove
#                    the own driver prototypes against the toolkit's cuda.h
#                    and against a 13.x prototype header, go vet and build
#                    both bindings (gorgonia.org/cu and own) with their
#                    tests, and check that the own binding's binary starts
#                    and falls back without a GPU
#   make gpu-check   on a machine with an NVIDIA GPU: build, print device,
#                    driver and toolkit, run the cuda-tagged tests (GPU
#                    against the reference for every format, timing and
#                    bytes per window; dequantization kernels per format
#                    in GB/s) and `qppl verify` per format; one report
#                    file $(GPU_CHECK_DIR)/report.txt
#   make gpu-bundle  the same checks for a GPU machine without Go: prebuilt
#                    binaries and mk/gpu-bundle.sh in bin/gpu-bundle

NVCC       ?= nvcc
PTXAS      ?= ptxas
NVCCFLAGS  ?= -O3 -std=c++17
CUDA_BIN   ?= bin/qppl-cuda
KERNEL_DIR := backends/cuda/kernels
PTX_DIR    := backends/cuda/gpu/ptx
KERNEL_SRC := $(wildcard $(KERNEL_DIR)/*.cu)
FATBINS    := $(patsubst $(KERNEL_DIR)/%.cu,$(PTX_DIR)/%.fatbin,$(KERNEL_SRC))
PTX_FILES  := $(patsubst $(KERNEL_DIR)/%.cu,$(PTX_DIR)/%.ptx,$(KERNEL_SRC))
GPU_CHECK_DIR ?= bin/gpu-check

# Toolkit version from `nvcc --version` ("release 12.8, V12.8.93" -> 12 8).
NVCC_RELEASE := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')
NVCC_MAJOR   := $(word 1,$(NVCC_RELEASE))
NVCC_MINOR   := $(word 2,$(NVCC_RELEASE))
NVCC_GE_12_8 := $(shell [ -n "$(NVCC_MAJOR)" ] && [ $(NVCC_MAJOR) -gt 12 -o \( $(NVCC_MAJOR) -eq 12 -a $(NVCC_MINOR) -ge 8 \) ] && echo 1)
NVCC_GE_13   := $(shell [ -n "$(NVCC_MAJOR)" ] && [ $(NVCC_MAJOR) -ge 13 ] && echo 1)

# SASS for every supported data-centre generation, compute_90 PTX for
# forward compatibility (JIT on a newer GPU). A driver older than the
# toolkit still runs the SASS (no CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
CUDA_GENCODE := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
ifeq ($(NVCC_GE_12_8),1)
CUDA_GENCODE += -gencode arch=compute_100,code=sm_100 -gencode arch=compute_120,code=sm_120
endif
CUDA_GENCODE += -gencode arch=compute_90,code=compute_90

# Driver binding: gorgonia.org/cu for toolkits 11.8-12.x (the design
# card's choice), the own prototypes (tag cudaown) for 13.x and later,
# whose cuda.h gorgonia.org/cu v0.9.6 does not compile against.
# Override with CUDA_BINDING=own or CUDA_BINDING=gorgonia.
ifeq ($(NVCC_GE_13),1)
CUDA_BINDING ?= own
else
CUDA_BINDING ?= gorgonia
endif
CUDA_TAGS_gorgonia := cuda
CUDA_TAGS_own      := cuda cudaown
CUDA_TAGS          := $(CUDA_TAGS_$(CUDA_BINDING))

# Where the toolkit lives: headers for cgo, lib64/stubs so that libcuda
# links in a container without the driver (the stub's soname is
# libcuda.so.1, provided at run time by the driver).
CUDA_HOME    ?= $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v $(NVCC) 2>/dev/null)))
CUDA_INC     := $(firstword $(wildcard $(CUDA_HOME)/include/cuda.h $(CUDA_HOME)/targets/*/include/cuda.h /usr/include/cuda.h))
CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib64/stubs $(CUDA_HOME)/targets/*/lib $(CUDA_HOME)/targets/*/lib/stubs /usr/lib/x86_64-linux-gnu/stubs /usr/lib/aarch64-linux-gnu/stubs)
CUDA_CGO_ENV := CGO_ENABLED=1 CGO_CFLAGS="$(CGO_CFLAGS) $(if $(CUDA_INC),-I$(dir $(CUDA_INC)))" CGO_LDFLAGS="$(CGO_LDFLAGS) $(foreach d,$(CUDA_LIBDIRS),-L$(d))"
CUDA_LDFLAGS := -X github.com/qppl/qppl/backends/cuda/gpu.Toolkit=$(NVCC_MAJOR).$(NVCC_MINOR)

.PHONY: cuda cuda-check gpu-check cuda-kernels cuda-need-nvcc

cuda-need-nvcc:
	@command -v $(NVCC) >/dev/null 2>&1 || { \
	  echo "cuda: $(NVCC) not found. Install the CUDA toolkit, e.g. on Debian 12:"; \
	  echo "  sed -i 's/^Components: main\$$/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources"; \
	  echo "  apt-get update && apt-get install -y nvidia-cuda-toolkit"; \
	  exit 1; }
	@command -v $(PTXAS) >/dev/null 2>&1 || { echo "cuda: $(PTXAS) not found (part of the CUDA toolkit)"; exit 1; }

$(PTX_DIR)/%.fatbin: $(KERNEL_DIR)/%.cu $(wildcard $(KERNEL_DIR)/*.cuh) | cuda-need-nvcc
	$(NVCC) $(NVCCFLAGS) -fatbin $(CUDA_GENCODE) -o $@ $<

$(PTX_DIR)/%.ptx: $(KERNEL_DIR)/%.cu $(wildcard $(KERNEL_DIR)/*.cuh) | cuda-need-nvcc
	$(NVCC) $(NVCCFLAGS) -ptx -arch=compute_90 -o $@ $<

cuda-kernels: $(FATBINS) $(PTX_FILES)

cuda: cuda-kernels
	$(CUDA_CGO_ENV) $(GO) build -tags '$(CUDA_TAGS)' -ldflags '$(CUDA_LDFLAGS)' -o $(CUDA_BIN) ./cmd/qppl
	@echo "built $(CUDA_BIN) (toolkit $(NVCC_MAJOR).$(NVCC_MINOR), driver binding $(CUDA_BINDING); --backend cuda [--gpus 0,1 --gpu-split GB,GB])"

cuda-check: cuda-need-nvcc cuda-kernels
	@set -e; for f in $(PTX_FILES); do $(PTXAS) -arch=sm_90 -o /dev/null $$f; echo "ptxas sm_90 ok: $$f"; done
	@echo "fatbins ($(CUDA_GENCODE)):"; ls -l $(FATBINS) | awk '{print "  " $$5 " " $$9}'
	$(CC) -fsyntax-only -Wall -Werror $(if $(CUDA_INC),-I$(dir $(CUDA_INC))) backends/cuda/gpu/testdata/cudrv_check.c
	@echo "own driver prototypes match $(CUDA_INC) (toolkit $(NVCC_MAJOR).$(NVCC_MINOR))"
	$(CC) -fsyntax-only -Wall -Werror -DQPPL_CUDA13 backends/cuda/gpu/testdata/cudrv_check.c
	@echo "own driver prototypes match the 13.x prototypes (backends/cuda/gpu/testdata/cuda13_driver.h)"
	@mkdir -p bin
	@set -e; for b in gorgonia own; do \
	  case $$b in gorgonia) tags="$(CUDA_TAGS_gorgonia)";; own) tags="$(CUDA_TAGS_own)";; esac; \
	  echo "== binding $$b (-tags '$$tags')"; \
	  $(CUDA_CGO_ENV) $(GO) vet -tags "$$tags" ./...; \
	  $(CUDA_CGO_ENV) $(GO) build -tags "$$tags" -ldflags '$(CUDA_LDFLAGS)' -o bin/qppl-cuda-$$b ./cmd/qppl; \
	  $(CUDA_CGO_ENV) $(GO) test -tags "$$tags" -c -o bin/gpu-$$b.test ./backends/cuda/gpu; \
	  $(CUDA_CGO_ENV) $(GO) test -tags "$$tags" -c -o bin/cuda-$$b.test ./backends/cuda; \
	done
	@bin/qppl-cuda-own --help >/dev/null 2>&1 && echo "bin/qppl-cuda-own --help runs on this machine" || { echo "bin/qppl-cuda-own --help failed"; exit 1; }
	@bin/gpu-own.test -test.run 'TestOpenWithoutGPU' -test.v > bin/nogpu-test.log 2>&1 || { cat bin/nogpu-test.log; exit 1; }; \
	  grep -E 'nogpu_test|^--- ' bin/nogpu-test.log
	@echo "cuda-check: kernels compile to fatbins, PTX valid, own prototypes match 11.x-13.x headers, both bindings and their tests build"

# Schemes verified on fixtures by gpu-check ("dense" = the unquantized model).
GPU_CHECK_SCHEMES ?= dense W4A16 W4A16-ASYM W4A16-G32 W4A16-ACTORDER W8A16 NVFP4A16 NVFP4 FP8 FP8-DYNAMIC W8A8 MXFP4 GPTQ GPTQ-ACTORDER AWQ BNB-NF4 BNB-NF4-DQ BNB-FP4 BNB-FP4-DQ BNB-INT8 AUTOFP8-DYNAMIC AUTOROUND-GPTQ AUTOROUND-AWQ AUTOROUND
# Architectures verified by gpu-check: empty = every family of the arch
# registry (`qppl fixture --list-archs`); set it to a subset to save time.
GPU_CHECK_ARCHS   ?=
# GGUF files verified by gpu-check: qppl convert of the llama fixture (Q/K
# permuted as llama.cpp writes it; tokenizer rebuilt from its metadata).
GPU_CHECK_GGUF    ?= f32 f16

gpu-check: cuda
	@mkdir -p $(GPU_CHECK_DIR)
	@set -e; d=$(GPU_CHECK_DIR); r=$$d/report.txt; : > $$r; \
	{ echo "qppl gpu-check $$(date -u +%FT%TZ)"; echo "commit: $$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; \
	  echo "toolkit: $$($(NVCC) --version | grep -m1 release)"; echo "driver binding: $(CUDA_BINDING) (-tags '$(CUDA_TAGS)')"; \
	  echo "fatbin targets: $(CUDA_GENCODE)"; uname -a; \
	  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,pcie.link.gen.current,pcie.link.width.current --format=csv; \
	  else echo "nvidia-smi not found"; fi; echo; } | tee -a $$r; \
	$(CUDA_CGO_ENV) QPPL_GPU_REPORT=$$d/timing.txt $(GO) test -tags '$(CUDA_TAGS)' -ldflags '$(CUDA_LDFLAGS)' -count=1 -timeout 60m -v ./backends/cuda/gpu 2>&1 | tee $$d/gpu-test.log || true; \
	{ echo "== device, timing per window and bytes moved (TestReport)"; cat $$d/timing.txt 2>/dev/null || echo "(no timing: TestReport did not run)"; echo; } | tee -a $$r; \
	$(CUDA_CGO_ENV) QPPL_DQ_REPORT=$$d/dequant.txt $(GO) test -tags '$(CUDA_TAGS)' -ldflags '$(CUDA_LDFLAGS)' -count=1 -timeout 30m -v -run 'TestDequant' ./backends/cuda 2>&1 | tee $$d/dequant-test.log || true; \
	{ echo "== dequantization per format, GB/s (TestDequantThroughput)"; cat $$d/dequant.txt 2>/dev/null || echo "(no table: TestDequantThroughput did not run)"; echo; } | tee -a $$r; \
	: > $$d/summary.txt; fail=0; \
	archs='$(GPU_CHECK_ARCHS)'; [ -n "$$archs" ] || archs=$$($(CUDA_BIN) fixture --list-archs); \
	for a in $$archs; do \
	  $(CUDA_BIN) fixture --arch $$a --out $$d/$$a >/dev/null; \
	  for s in $(GPU_CHECK_SCHEMES); do \
	    m=$$d/$$a; if [ $$s != dense ]; then m=$$d/$$a-$$s; $(CUDA_BIN) quantize --model $$d/$$a --scheme $$s --out $$m >/dev/null; fi; \
	    for p in fp32 bf16; do \
	      if $(CUDA_BIN) verify --model $$m --backends reference,cuda --precision $$p --ctx 256 --windows 2 --text fixtures/demo.txt \
	           --json $$d/verify-$$a-$$s-$$p.json > $$d/verify-$$a-$$s-$$p.txt 2>&1; then res=PASS; \
	      elif grep -q 'not implemented by the CUDA backend' $$d/verify-$$a-$$s-$$p.txt; then res=SKIP; \
	      else res=FAIL; fail=1; fi; \
	      why=$$(grep -m1 'max |ΔNLL|' $$d/verify-$$a-$$s-$$p.txt | tr -s ' '); [ $$res = PASS ] || why="$$why $$(tail -1 $$d/verify-$$a-$$s-$$p.txt)"; \
	      printf '%-8s %-15s %-5s %s  %s\n' $$a $$s $$p $$res "$$why" | tee -a $$d/summary.txt; \
	    done; \
	  done; \
	done; \
	[ -z "$(GPU_CHECK_GGUF)" ] || $(CUDA_BIN) fixture --arch llama --out $$d/gguf-llama >/dev/null; \
	for t in $(GPU_CHECK_GGUF); do \
	  g=$$d/llama-$$t.gguf; $(CUDA_BIN) convert --model $$d/gguf-llama --to gguf --type $$t --out $$g >/dev/null; \
	  for p in fp32 bf16; do \
	    if $(CUDA_BIN) verify --model $$g --backends reference,cuda --precision $$p --ctx 256 --windows 2 --text fixtures/demo.txt \
	         --json $$d/verify-gguf-$$t-$$p.json > $$d/verify-gguf-$$t-$$p.txt 2>&1; then res=PASS; else res=FAIL; fail=1; fi; \
	    why=$$(grep -m1 'max |ΔNLL|' $$d/verify-gguf-$$t-$$p.txt | tr -s ' '); [ $$res = PASS ] || why="$$why $$(tail -1 $$d/verify-gguf-$$t-$$p.txt)"; \
	    printf '%-8s %-15s %-5s %s  %s\n' llama gguf-$$t $$p $$res "$$why" | tee -a $$d/summary.txt; \
	  done; \
	done; \
	{ echo "== qppl verify (reference vs cuda) per architecture, scheme and precision"; cat $$d/summary.txt; echo; \
	  echo "== cuda-tagged tests"; grep -E -- '^(--- |ok |FAIL|panic:)' $$d/gpu-test.log $$d/dequant-test.log || true; \
	  grep -h -A20 -E -- '--- FAIL' $$d/gpu-test.log $$d/dequant-test.log | head -200 || true; echo; \
	  echo "gpu-check summary:"; echo "  verify PASS: $$(grep -c PASS $$d/summary.txt || true)"; echo "  verify FAIL: $$(grep -c FAIL $$d/summary.txt || true)"; } >> $$r; \
	if grep -q '^ok ' $$d/gpu-test.log && grep -q '^ok ' $$d/dequant-test.log && ! grep -qE -- '--- FAIL|^FAIL|^panic:' $$d/gpu-test.log $$d/dequant-test.log; then echo "  cuda-tagged tests: PASS" >> $$r; \
	else echo "  cuda-tagged tests: FAIL (see $$d/gpu-test.log, $$d/dequant-test.log)" >> $$r; fail=1; fi; \
	tail -4 $$r; echo "report: $$r (attach it to a bug report)"; \
	exit $$fail

# gpu-check for a GPU machine without Go (mk/gpu-bundle.sh says how to run
# it there): the binaries and the test binaries, own binding, gzipped.
GPU_BUNDLE_DIR ?= bin/gpu-bundle
.PHONY: gpu-bundle
gpu-bundle: cuda-kernels
	@mkdir -p $(GPU_BUNDLE_DIR)
	CGO_ENABLED=1 $(GO) build -tags 'cuda cudaown' -ldflags '-s -w $(CUDA_LDFLAGS)' -o $(GPU_BUNDLE_DIR)/qppl-cuda ./cmd/qppl
	CGO_ENABLED=1 $(GO) test -c -tags 'cuda cudaown' -ldflags '-s -w $(CUDA_LDFLAGS)' -o $(GPU_BUNDLE_DIR)/gpu.test ./backends/cuda/gpu
	CGO_ENABLED=1 $(GO) test -c -tags 'cuda cudaown' -ldflags '-s -w $(CUDA_LDFLAGS)' -o $(GPU_BUNDLE_DIR)/cuda.test ./backends/cuda
	gzip -9 -f $(GPU_BUNDLE_DIR)/qppl-cuda $(GPU_BUNDLE_DIR)/gpu.test $(GPU_BUNDLE_DIR)/cuda.test
	cp mk/gpu-bundle.sh $(GPU_BUNDLE_DIR)/run.sh
	@echo "commit: $$(git rev-parse --short HEAD 2>/dev/null)$$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'), toolkit $(NVCC_MAJOR).$(NVCC_MINOR)" > $(GPU_BUNDLE_DIR)/commit.txt
	@echo "wrote $(GPU_BUNDLE_DIR) ($$(du -sh $(GPU_BUNDLE_DIR) | cut -f1)); on the GPU machine, in the repository: bash $(GPU_BUNDLE_DIR)/run.sh [OUTDIR]"

# Emulator throughput row of `make bench` (CPU; not a GPU estimate).
BENCH_TARGETS += bench-emu
.PHONY: bench-emu
bench-emu:
	$(GO) test -run '^$$' -bench 'EmuScore' -benchtime=2x ./backends/cuda | tee -a $(BENCH_OUT)
