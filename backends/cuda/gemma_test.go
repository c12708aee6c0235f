package cuda

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/backendtest"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/checkpoint"
)

// TestGemmaKernels: the kernels of gemma.cu against their float64
// definitions (PyTorch's gelu(approximate="tanh"), tanh soft-capping, a
// scale) on values spanning the saturating range; fp32 arithmetic, so a
// relative error of a few ulps.
func TestGemmaKernels(t *testing.T) {
	d := emuDevices(t, 1, 1<<26)[0]
	rng := rand.New(rand.NewPCG(14, 2))
	const T, I = 7, 37
	n := T * I
	x, y, gu := make([]float32, n), make([]float32, n), make([]float32, 2*n)
	for i := range x {
		x[i], y[i] = float32(rng.NormFloat64()*4), float32(rng.NormFloat64())
	}
	for i := range gu {
		gu[i] = float32(rng.NormFloat64() * 4)
	}
	up := func(v []float32) device.Ptr {
		p, err := allocCopy(d, f32le(v))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	down := func(p device.Ptr, n int) []float64 {
		b := make([]byte, 4*n)
		if err := d.CopyOut(b, p); err != nil {
			t.Fatal(err)
		}
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return out
	}
	gelu := func(v float64) float64 {
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	check := func(name string, got []float64, want func(i int) float64) {
		t.Helper()
		for i, g := range got {
			w := want(i)
			if math.Abs(g-w) > 2e-6*math.Max(1, math.Abs(w)) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, g, w)
			}
		}
	}
	px, py, pg := up(x), up(y), up(gu)
	out, err := d.Alloc(int64(4 * n))
	if err != nil {
		t.Fatal(err)
	}
	if err := device.LaunchGeluTanhMul(d, out, px, py, n); err != nil {
		t.Fatal(err)
	}
	check("gelu_tanh_mul", down(out, n), func(i int) float64 { return gelu(float64(x[i])) * float64(y[i]) })
	if err := device.LaunchGeluTanhMulCat(d, out, pg, T, I); err != nil {
		t.Fatal(err)
	}
	check("gelu_tanh_mul_cat", down(out, n), func(i int) float64 {
		r, c := i/I, i%I
		return gelu(float64(gu[r*2*I+c])) * float64(gu[r*2*I+I+c])
	})
	if err := device.LaunchSoftcap(d, px, n, 3); err != nil {
		t.Fatal(err)
	}
	check("softcap", down(px, n), func(i int) float64 { return math.Tanh(float64(x[i])/3) * 3 })
	if err := device.LaunchScale(d, py, n, 8); err != nil {
		t.Fatal(err)
	}
	check("scale_f32", down(py, n), func(i int) float64 { return float64(y[i]) * 8 })
}

// withCaps copies the gemma2 model dir with its soft caps replaced (nil:
// JSON null, no capping).
func withCaps(t *testing.T, dir string, attn, final any) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, checkpoint.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["attn_logit_softcapping"], cfg["final_logit_softcapping"] = attn, final
	out := t.TempDir()
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(out, checkpoint.ConfigFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.ReadFile(filepath.Join(dir, checkpoint.SafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, checkpoint.SafetensorsFile), st, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGemmaSoftcapEmu: gemma2 on the emulator in fp32 against the float64
// reference with small caps that change every score and logit (attention
// 2, final 3); a huge cap (1e12) equals no cap to fp32 rounding; and the
// small caps move the NLL far beyond that (so the comparisons can fail).
func TestGemmaSoftcapEmu(t *testing.T) {
	src := t.TempDir()
	if _, err := backendtest.WriteModel(src, "gemma2", 5); err != nil {
		t.Fatal(err)
	}
	toks := testTokens(80, backendtest.Vocab, 3) // longer than the fixture's 32-token window
	opt := Options{Name: "emu", Precision: "fp32", MaxTokens: 96}
	nll := func(dir string) []float64 {
		_, _, b := compareWithReference(t, dir, emuDevices(t, 1, 1<<30), opt, toks)
		sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
		if err != nil {
			t.Fatal(err)
		}
		return sc.NLL
	}
	small := withCaps(t, src, 2.0, 3.0)
	maxd, meand, _ := compareWithReference(t, small, emuDevices(t, 1, 1<<30), opt, toks)
	if !(maxd <= 1e-4 && meand <= 2e-5) {
		t.Errorf("caps 2, 3: emu vs reference max |ΔNLL| %.3g, mean %.3g", maxd, meand)
	}
	none, huge, capped := nll(withCaps(t, src, nil, nil)), nll(withCaps(t, src, 1e12, 1e12)), nll(small)
	var dHuge, dCap float64
	for i := range none {
		dHuge = math.Max(dHuge, math.Abs(huge[i]-none[i]))
		dCap = math.Max(dCap, math.Abs(capped[i]-none[i]))
	}
	t.Logf("max |ΔNLL| huge cap vs none %.3g, caps 2/3 vs none %.3g", dHuge, dCap)
	if !(dHuge <= 1e-5) || !(dCap > 0.1) {
		t.Errorf("max |ΔNLL|: huge cap vs none %.3g (want ≤ 1e-5), caps 2/3 vs none %.3g (want > 0.1)", dHuge, dCap)
	}
}
