# CUDA targets (owned by backends/cuda; see docs/cuda.md).
#
#   make cuda        build bin/qppl-cuda with -tags cuda (PTX for sm_80 and
#                    sm_90 compiled first and embedded)
#   make cuda-check  no GPU needed, installs nothing: compile every kernel
#                    with nvcc for sm_80 and sm_90, validate the PTX with
#                    ptxas, go vet -tags cuda ./..., compile the cuda-tagged
#                    packages and tests
#   make gpu-check   on a machine with an NVIDIA GPU: build, run the
#                    cuda-tagged tests (GPU against the reference for every
#                    format) and `qppl verify` per format, print a summary

NVCC       ?= nvcc
PTXAS      ?= ptxas
NVCCFLAGS  ?= -O3 -std=c++17
CUDA_ARCHS := 80 90
CUDA_BIN   ?= bin/qppl-cuda
KERNEL_DIR := backends/cuda/kernels
PTX_DIR    := backends/cuda/gpu/ptx
KERNEL_SRC := $(wildcard $(KERNEL_DIR)/*.cu)
PTX_FILES  := $(foreach a,$(CUDA_ARCHS),$(patsubst $(KERNEL_DIR)/%.cu,$(PTX_DIR)/%.sm_$(a).ptx,$(KERNEL_SRC)))
GPU_CHECK_DIR ?= bin/gpu-check

.PHONY: cuda cuda-check gpu-check cuda-ptx cuda-need-nvcc

cuda-need-nvcc:
	@command -v $(NVCC) >/dev/null 2>&1 || { \
	  echo "cuda: $(NVCC) not found. Install the CUDA toolkit, e.g. on Debian 12:"; \
	  echo "  sed -i 's/^Components: main\$$/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources"; \
	  echo "  apt-get update && apt-get install -y nvidia-cuda-toolkit"; \
	  exit 1; }
	@command -v $(PTXAS) >/dev/null 2>&1 || { echo "cuda: $(PTXAS) not found (part of the CUDA toolkit)"; exit 1; }

$(PTX_DIR)/%.sm_80.ptx: $(KERNEL_DIR)/%.cu $(KERNEL_DIR)/common.cuh | cuda-need-nvcc
	$(NVCC) $(NVCCFLAGS) -ptx -arch=sm_80 -o $@ $<

$(PTX_DIR)/%.sm_90.ptx: $(KERNEL_DIR)/%.cu $(KERNEL_DIR)/common.cuh | cuda-need-nvcc
	$(NVCC) $(NVCCFLAGS) -ptx -arch=sm_90 -o $@ $<

cuda-ptx: $(PTX_FILES)

cuda: cuda-ptx
	$(GO) build -tags cuda -o $(CUDA_BIN) ./cmd/qppl
	@echo "built $(CUDA_BIN) (CUDA backend: --backend cuda [--gpus 0,1 --gpu-split GB,GB])"

cuda-check: cuda-need-nvcc cuda-ptx
	@set -e; for a in $(CUDA_ARCHS); do for f in $(PTX_DIR)/*.sm_$$a.ptx; do \
	  $(PTXAS) -arch=sm_$$a -o /dev/null $$f; echo "ptxas sm_$$a ok: $$f"; done; done
	$(GO) vet -tags cuda ./...
	$(GO) build -tags cuda -o /dev/null ./cmd/qppl
	@mkdir -p bin
	$(GO) test -tags cuda -c -o bin/gpu.test ./backends/cuda/gpu
	$(GO) test -tags cuda -c -o bin/cuda.test ./backends/cuda
	@echo "cuda-check: kernels compile for sm_80 and sm_90, PTX valid, cuda-tagged packages and tests compile"

# Schemes verified on fixtures by gpu-check ("dense" = the unquantized model).
GPU_CHECK_SCHEMES ?= dense W4A16 W4A16-ASYM W4A16-G32 W4A16-ACTORDER W8A16 NVFP4A16 NVFP4 FP8 FP8-DYNAMIC W8A8 MXFP4 GPTQ GPTQ-ACTORDER AWQ
GPU_CHECK_ARCHS   ?= llama mistral qwen2 qwen3

gpu-check: cuda
	@command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || echo "gpu-check: nvidia-smi not found (continuing)"
	@mkdir -p $(GPU_CHECK_DIR)
	$(GO) test -tags cuda -count=1 -timeout 60m -v ./backends/cuda/gpu 2>&1 | tee $(GPU_CHECK_DIR)/gpu-test.log
	@set -e; d=$(GPU_CHECK_DIR); : > $$d/summary.txt; fail=0; \
	for a in $(GPU_CHECK_ARCHS); do \
	  $(CUDA_BIN) fixture --arch $$a --out $$d/$$a >/dev/null; \
	  for s in $(GPU_CHECK_SCHEMES); do \
	    m=$$d/$$a; if [ $$s != dense ]; then m=$$d/$$a-$$s; $(CUDA_BIN) quantize --model $$d/$$a --scheme $$s --out $$m >/dev/null; fi; \
	    for p in fp32 bf16; do \
	      if $(CUDA_BIN) verify --model $$m --backends reference,cuda --precision $$p --ctx 256 --windows 2 --text fixtures/demo.txt \
	           --json $$d/verify-$$a-$$s-$$p.json > $$d/verify-$$a-$$s-$$p.txt 2>&1; then r=PASS; else r=FAIL; fail=1; fi; \
	      printf '%-8s %-15s %-5s %s  %s\n' $$a $$s $$p $$r "$$(grep -m1 'max |ΔNLL|' $$d/verify-$$a-$$s-$$p.txt | tr -s ' ')" | tee -a $$d/summary.txt; \
	    done; \
	  done; \
	done; \
	echo; echo "gpu-check summary ($$d/summary.txt):"; \
	grep -c PASS $$d/summary.txt | xargs echo "  verify PASS:"; grep -c FAIL $$d/summary.txt | xargs echo "  verify FAIL:" || true; \
	if grep -q '^ok ' $$d/gpu-test.log && ! grep -qE -- '--- FAIL|^FAIL|^panic:' $$d/gpu-test.log; then echo "  cuda-tagged tests: PASS"; \
	else echo "  cuda-tagged tests: FAIL (see $$d/gpu-test.log)"; fail=1; fi; \
	exit $$fail

# Emulator throughput row of `make bench` (CPU; not a GPU estimate).
BENCH_TARGETS += bench-emu
.PHONY: bench-emu
bench-emu:
	$(GO) test -run '^$$' -bench 'EmuScore' -benchtime=2x ./backends/cuda | tee -a $(BENCH_OUT)
