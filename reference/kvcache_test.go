package reference

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// kvFixture writes a dense fixture of family a and returns its directory,
// with the KV amax calibrated on seeded windows other than the test's.
func kvFixture(t *testing.T, family string) (string, [][2][]float64) {
	t.Helper()
	o, err := fixtures.Defaults(family)
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init, o.DType = 300, fixtures.InitRandom, checkpoint.BF16
	src := filepath.Join(t.TempDir(), "dense")
	if err := fixtures.Write(src, o); err != nil {
		t.Fatal(err)
	}
	m, err := arch.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	amax, err := CalibrateKV(context.Background(), m, [][]int32{randomTokens(40, o.Vocab, 101), randomTokens(40, o.Vocab, 102)})
	if err != nil {
		t.Fatal(err)
	}
	return src, amax
}

func openKV(t *testing.T, dir, mode string) *Backend {
	t.Helper()
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(m, Options{KVCacheQuant: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestKVCacheAgainstOracle: a checkpoint with an FP8 KV cache
// (compressed-tensors kv_cache_scheme and ModelOpt kv_cache_quant_algo),
// evaluated with the cache quantized, agrees with the oracle's own FP8
// cache to 1e-9; the cache changes the numbers; with --kv-cache-quant off
// it equals the same weights without a KV scheme bit for bit.
func TestKVCacheAgainstOracle(t *testing.T) {
	for _, c := range []struct{ family, scheme, kv string }{
		{"llama", "W4A16", quantizer.KVCacheFP8},
		{"qwen3", "FP8", quantizer.KVCacheFP8}, // k-norm before RoPE, then the cache
		{"llama", "MODELOPT-NVFP4", quantizer.KVCacheFP8},
		{"mistral", "W8A16", quantizer.KVCacheFP8Head}, // attn_head: one scale per key/value head
	} {
		t.Run(c.family+"/"+c.scheme+"/"+c.kv, func(t *testing.T) {
			src, amax := kvFixture(t, c.family)
			plain := filepath.Join(t.TempDir(), "plain")
			kv := filepath.Join(t.TempDir(), "kv")
			if err := quantizer.Quantize(src, plain, c.scheme, quantizer.Options{Seed: 3}); err != nil {
				t.Fatal(err)
			}
			if err := quantizer.Quantize(src, kv, c.scheme, quantizer.Options{Seed: 3, KVCache: c.kv, KVAmax: amax}); err != nil {
				t.Fatal(err)
			}
			toks := randomTokens(70, 300, 5)
			on := allLogProbs(t, openKV(t, kv, ""), toks)
			off := allLogProbs(t, openKV(t, kv, quant.KVQuantOff), toks)
			weights := allLogProbs(t, openKV(t, plain, ""), toks)

			m, err := arch.OpenDir(kv)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			get, opt := quantOracle(t, m)
			opt.KVCacheFP8 = true
			want, err := oracle.LogProbs(m.Config, get, toks, opt)
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(on, want); d > 1e-9 {
				t.Errorf("KV cache on: max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			if d, _, _ := maxAbsDiff(on, off); d < 1e-6 {
				t.Errorf("KV cache on and off within %g: the cache changed nothing", d)
			}
			if d, p, v := maxAbsDiff(off, weights); d != 0 {
				t.Errorf("KV cache off differs from the checkpoint without a KV scheme by %g at pos %d id %d", d, p, v)
			}
			opt.KVCacheFP8 = false
			wantOff, err := oracle.LogProbs(m.Config, get, toks, opt)
			if err != nil {
				t.Fatal(err)
			}
			if d, _, _ := maxAbsDiff(off, wantOff); d > 1e-9 {
				t.Errorf("KV cache off: max |reference - oracle| = %g", d)
			}
		})
	}
}

// TestKVCacheModes: on needs a KV scheme; unknown modes are refused.
func TestKVCacheModes(t *testing.T) {
	src, _ := kvFixture(t, "llama")
	m, err := arch.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for mode, want := range map[string]string{quant.KVQuantOn: "declares no quantized KV cache", "maybe": `--kv-cache-quant "maybe"`} {
		if _, err := New(m, Options{KVCacheQuant: mode}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %q: %v, want %q", mode, err, want)
		}
	}
	if _, err := New(m, Options{KVCacheQuant: quant.KVQuantOff}); err != nil {
		t.Errorf("off on a checkpoint without a KV scheme: %v", err)
	}
}
