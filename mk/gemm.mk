# Cross-GOARCH bit identity of the float64 reference (packages gemm, detmath,
# reference). `make arm64-check` vets and builds the arm64 test binaries; when
# qemu-user is installed (Debian: apt-get install qemu-user) it runs them and
# checks that the arm64 forward passes give the same bits as amd64 with the
# assembly kernel and with QPPL_NOASM=1 (TestCrossArchBits, via
# QPPL_CROSSARCH_DIR).
QEMU_AARCH64 ?= $(shell command -v qemu-aarch64 || command -v qemu-aarch64-static)

.PHONY: arm64-check
arm64-check:
	GOARCH=arm64 $(GO) vet ./gemm ./detmath ./reference
	@set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	for p in gemm detmath reference; do GOARCH=arm64 $(GO) test -c -o $$d/$$p.arm64 ./$$p; done; \
	QPPL_CROSSARCH_DIR=$$d $(GO) test -count=1 -v -run '^TestCrossArchBits$$' ./reference | grep -E 'wrote|same bits|^(ok|FAIL|---)'; \
	QPPL_NOASM=1 QPPL_CROSSARCH_DIR=$$d $(GO) test -count=1 -v -run '^TestCrossArchBits$$' ./reference | grep -E 'same bits|^(ok|FAIL|---)'; \
	if [ -z "$(QEMU_AARCH64)" ]; then echo "arm64-check: qemu-aarch64 not found: arm64 binaries built, not run"; exit 0; fi; \
	(cd gemm && $(QEMU_AARCH64) $$d/gemm.arm64 -test.count=1); \
	(cd detmath && $(QEMU_AARCH64) $$d/detmath.arm64 -test.count=1); \
	(cd reference && QPPL_CROSSARCH_DIR=$$d $(QEMU_AARCH64) $$d/reference.arm64 -test.count=1 -test.v -test.run '^TestCrossArchBits$$' | grep -E 'same bits|^(ok|FAIL|PASS|---)')
