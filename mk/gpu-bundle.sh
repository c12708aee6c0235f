#!/bin/bash
# make gpu-check for a GPU machine without Go: `make gpu-bundle` (on any
# machine with the toolkit) writes bin/gpu-bundle: this script as run.sh
# and, gzipped, qppl-cuda, gpu.test (backends/cuda/gpu) and cuda.test
# (backends/cuda), built with the own binding (-tags 'cuda cudaown': the
# driver and cuBLAS are dlopened, so any toolkit's libcublas.so.11-13
# serves) and the kernels' fatbins embedded. On the GPU machine, from the
# repository's root (the tests read their testdata):
#   bash bin/gpu-bundle/run.sh [OUTDIR]   (default bin/gpu-check)
# It runs the cuda-tagged tests, the dequantization tests, and qppl verify
# (reference against cuda, fp32 and bf16) over 12 architectures × 8
# schemes, and writes OUTDIR/report.txt.
set -u
R=$PWD; D=${1:-${OUT:-$R/bin/gpu-check}}; B=$(cd "$(dirname "$0")" && pwd); mkdir -p $D
(cd $B && gunzip -f *.gz && chmod +x qppl-cuda gpu.test cuda.test)
lib=$(find /usr/local /opt /usr/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | grep -v Lt | head -1)
[ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname $lib):${LD_LIBRARY_PATH:-}
r=$D/report.txt
{ echo "qppl gpu-check (prebuilt binaries) $(date -u +%FT%TZ)"; cat $B/commit.txt 2>/dev/null
  echo "cuBLAS found: $lib"; uname -a
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv
  nvcc --version 2>/dev/null | grep release; echo; } > $r
t0=$(date +%s)
(cd backends/cuda/gpu && QPPL_GPU_REPORT=$D/timing.txt timeout 240 $B/gpu.test -test.count=1 -test.v -test.timeout 235s > $D/gpu-test.log 2>&1; echo "gpu.test rc=$? ($(( $(date +%s)-t0 )) s)" >> $r)
{ echo "== TestReport timing"; cat $D/timing.txt 2>/dev/null || echo "(none)"; echo; } >> $r
t1=$(date +%s)
(cd backends/cuda && QPPL_DQ_REPORT=$D/dequant.txt timeout 80 $B/cuda.test -test.count=1 -test.v -test.run 'TestDequant' -test.timeout 75s > $D/dequant-test.log 2>&1; echo "cuda.test TestDequant rc=$? ($(( $(date +%s)-t1 )) s)" >> $r)
{ echo "== dequant GB/s"; cat $D/dequant.txt 2>/dev/null || echo "(none)"; echo; } >> $r
V=/tmp/v; mkdir -p $V
one() { a=$1; s=$2; p=$3; m=$V/$a; [ $s = dense ] || m=$V/$a-$s
  if [ ! -f $m/config.json ]; then printf '%-12s %-10s %-5s %s\n' $a $s $p "NOQUANT (the fixture quantizer wrote no model)"; return; fi
  if $B/qppl-cuda verify --model $m --backends reference,cuda --precision $p --ctx 256 --windows 2 --text fixtures/demo.txt > $V/out-$a-$s-$p.txt 2>&1; then res=PASS
  elif grep -q 'not implemented by the CUDA backend' $V/out-$a-$s-$p.txt; then res=SKIP; else res=FAIL; fi
  why=$(grep -m1 'max |ΔNLL|' $V/out-$a-$s-$p.txt | tr -s ' '); [ $res = PASS ] || why="$why $(tail -1 $V/out-$a-$s-$p.txt)"
  printf '%-12s %-10s %-5s %s %s\n' $a $s $p $res "$why"; }
export -f one; export B V
ARCHS="llama qwen3 qwen3_moe mixtral phi3 gemma2 gemma3_text qwen3_5 qwen3_5_moe gemma4_text gemma3 gpt_oss"
SCH="W4A16 NVFP4 FP8 GPTQ AWQ MXFP4 BNB-NF4"
for a in $ARCHS; do $B/qppl-cuda fixture --arch $a --out $V/$a >/dev/null 2>&1; done
for a in $ARCHS; do for s in $SCH; do echo "$a $s"; done; done | timeout 60 xargs -P 12 -n 2 sh -c "$B/qppl-cuda quantize --model $V/\$0 --scheme \$1 --out $V/\$0-\$1 >/dev/null 2>&1"
for a in $ARCHS; do for s in dense $SCH; do for p in fp32 bf16; do echo "$a $s $p"; done; done; done > $V/jobs
t2=$(date +%s)
timeout 150 xargs -P 8 -n 3 bash -c 'one "$0" "$1" "$2"' < $V/jobs | sort > $D/verify.txt
{ echo "== qppl verify reference,cuda ($(( $(date +%s)-t2 )) s; $(wc -l < $V/jobs) jobs)"; cat $D/verify.txt; echo
  echo "== cuda-tagged tests"; grep -E -- '^(--- |ok |FAIL|panic:)' $D/gpu-test.log $D/dequant-test.log
  grep -h -B2 -A25 -E -- '--- FAIL|^panic:' $D/gpu-test.log $D/dequant-test.log | head -150
  echo "summary: verify PASS $(grep -c ' PASS ' $D/verify.txt) FAIL $(grep -c ' FAIL ' $D/verify.txt) SKIP $(grep -c ' SKIP ' $D/verify.txt)"; } >> $r
tar czf $D/verify-out.tgz -C $V $(cd $V && ls out-*.txt) 2>/dev/null
tail -5 $r
