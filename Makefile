# qppl — see README.md. Every target runs from a clean clone.
GO      ?= go
BIN     ?= bin/qppl
PKGS    := ./...

.PHONY: all build demo test vet fmt-check clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/qppl

# The main job on the embedded default fixture: no download, no ../shared.
demo: build
	$(BIN) demo

# Static checks plus the whole test suite (default build: no GPU needed).
test: vet fmt-check
	$(GO) test -count=1 -timeout 30m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin

# Package-owned targets (bench, fuzz, cuda-check, gpu-check, ...).
-include mk/*.mk
