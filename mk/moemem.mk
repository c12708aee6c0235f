# make bench-moe-mem: peak resident memory of the reference backend scoring
# one 256-token window of qwen3_moe and qwen3_5_moe fixtures (32 experts of
# 1024 on hidden 512, BF16 and W4A16), each in a child process, next to
# the packed checkpoint, one expert decoded to float64 and the workspace
# (issue 14; reference/moepeak_test.go). Writes ~300 MB of temporary
# fixtures; takes about a minute.

.PHONY: bench-moe-mem

bench-moe-mem:
	QPPL_MOE_PEAK=1 $(GO) test -run '^TestMoEPeakMemory$$' -count=1 -v -timeout 30m ./reference
