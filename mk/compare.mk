# Package compare: fuzz targets and benchmarks (helper F).
FUZZ_TARGETS += ./compare:FuzzWindowResultUnmarshal
FUZZ_TARGETS += ./compare:FuzzOpenStore

BENCH_TARGETS += bench-compare

.PHONY: bench-compare
bench-compare:
	$(GO) test -run '^$$' -bench 'BenchmarkU16Vocab128256|BenchmarkReduceRows20Ctx2048KLD' -benchtime=20x -count=1 ./compare | tee -a $(BENCH_OUT)
