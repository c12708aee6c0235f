package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/fixtures/quantizer"
	"github.com/qppl/qppl/quant"
	"github.com/qppl/qppl/reference"
)

// TestKVQuantKernel: kv_quant equals quant.FakeQuantKV bit for bit when
// x/s is exact in fp32 (s a power of two), per tensor and per head,
// saturation and signed zeros included.
func TestKVQuantKernel(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	const T, H, D = 5, 3, 8
	rng := rand.New(rand.NewPCG(4, 2))
	x := make([]float64, T*H*D)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(14)-6)))
	}
	x[0], x[1], x[2], x[3] = 1e4, -1e4, math.Copysign(0, -1), 0x1p-14
	for _, scales := range [][]float64{{0.0625}, {0.25, 1, 4}} {
		want := append([]float64(nil), x...)
		quant.FakeQuantKV(want, scales, T, H, D)
		xf := make([]float32, len(x))
		for i, v := range x {
			xf[i] = float32(v)
		}
		p, err := allocCopy(d, f32Bytes(xf))
		if err != nil {
			t.Fatal(err)
		}
		if len(scales) == 1 {
			err = device.LaunchKVQuant(d, p, T, H, D, -1, float32(scales[0]))
		} else {
			for h, s := range scales {
				if err = device.LaunchKVQuant(d, p, T, H, D, h, float32(s)); err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4*len(x))
		if err := d.CopyOut(buf, p); err != nil {
			t.Fatal(err)
		}
		d.Free(p)
		for i := range want {
			got := float64(math.Float32frombits(uint32(buf[4*i]) | uint32(buf[4*i+1])<<8 | uint32(buf[4*i+2])<<16 | uint32(buf[4*i+3])<<24))
			if math.Float64bits(got) != math.Float64bits(want[i]) {
				t.Errorf("scales %v: element %d (x %v): kernel %v, quant %v", scales, i, x[i], got, want[i])
			}
		}
	}
}

// TestKVCacheAgainstReference: checkpoints with an FP8 KV cache (a
// compressed-tensors one per tensor and per head, a ModelOpt one) on emu in fp32 against the
// float64 reference, both with the cache on (tolerance of the activation
// quantization schemes, docs/cuda.md: an fp32 key now and then rounds to
// the neighbouring E4M3 code); off builds no cache and scores differently.
func TestKVCacheAgainstReference(t *testing.T) {
	for _, c := range []struct{ scheme, kv string }{
		{"W4A16", quantizer.KVCacheFP8}, {"MODELOPT-NVFP4", quantizer.KVCacheFP8}, {"W8A16", quantizer.KVCacheFP8Head},
	} {
		sc := c.scheme + "/" + c.kv
		o, err := fixtures.Defaults("qwen3")
		if err != nil {
			t.Fatal(err)
		}
		o.Vocab = 260
		dense := filepath.Join(t.TempDir(), "dense")
		if err := fixtures.Write(dense, o); err != nil {
			t.Fatal(err)
		}
		m := openModel(t, dense)
		amax, err := reference.CalibrateKV(context.Background(), m, [][]int32{testTokens(48, 256, 11)})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "kv")
		if err := quantizer.Quantize(dense, dir, c.scheme, quantizer.Options{Seed: 3, GroupSize: groupSize(c.scheme), KVCache: c.kv, KVAmax: amax}); err != nil {
			t.Fatal(err)
		}
		toks := testTokens(64, 256, 9)
		maxd, meand, on := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64}, toks)
		t.Logf("%s KV on: max |ΔNLL| %.3g mean %.3g", sc, maxd, meand)
		if !(maxd <= 5e-2 && meand <= 5e-3) {
			t.Errorf("%s KV on: max |ΔNLL| %.3g mean %.3g, tolerance 5e-2, 5e-3", sc, maxd, meand)
		}
		if on.kv == nil {
			t.Errorf("%s: the KV cache is not quantized by default", sc)
		}
		off, err := New(openModel(t, dir), emuDevices(t, 1, 1<<30), Options{Name: "emu", Precision: "fp32", MaxTokens: 64, KVCacheQuant: quant.KVQuantOff})
		if err != nil {
			t.Fatal(err)
		}
		defer off.Close()
		if off.kv != nil {
			t.Errorf("%s: --kv-cache-quant off still quantizes", sc)
		}
		w := backends.Window{Tokens: toks, First: 1}
		a, err := on.Score(context.Background(), w, backends.Request{TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		z, err := off.Score(context.Background(), w, backends.Request{TopK: 1})
		if err != nil {
			t.Fatal(err)
		}
		diff := 0.0
		for i := range a.NLL {
			diff = math.Max(diff, math.Abs(a.NLL[i]-z.NLL[i]))
		}
		if diff < 1e-6 {
			t.Errorf("%s: emu with the KV cache on and off within %g", sc, diff)
		}
	}
}
