package ggufemu_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/backends/cuda"
	"github.com/qppl/qppl/backends/cuda/device"
	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/internal/ggufgen"
	"github.com/qppl/qppl/reference"
)

// ggufFixture writes fixture arch (full attention: llama.cpp's graphs have
// no sliding window), converts it to an F32 GGUF and returns both paths.
func ggufFixture(t *testing.T, arch string, edit func(*fixtures.Options)) (dir, path string) {
	t.Helper()
	o, err := fixtures.Defaults(arch)
	if err != nil {
		t.Fatal(err)
	}
	o.Config = map[string]any{"sliding_window": nil, "use_sliding_window": false}
	if arch == "qwen3_moe" {
		o.Config["mlp_only_layers"] = []int{} // llama.cpp's qwen3moe: experts on every layer
	}
	if edit != nil {
		edit(&o)
	}
	dir = filepath.Join(t.TempDir(), arch)
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), arch+"-f32.gguf")
	if err := gguf.ConvertFile(dir, path, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func openGGUF(t testing.TB, path string) *gguf.Model {
	t.Helper()
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// scoreNLL scores one window (first scored position 1) and returns its NLL.
func scoreNLL(t *testing.T, b backends.Backend, toks []int32) []float64 {
	t.Helper()
	sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	return sc.NLL
}

func emuDevices(t testing.TB, n int, mem int64) []device.Device {
	t.Helper()
	var ds []device.Device
	for i := 0; i < n; i++ {
		d, err := emu.New(emu.Options{Name: "emu:" + string(rune('0'+i)), MemBytes: mem, CheckGuards: true})
		if errors.Is(err, emu.ErrNoCgo) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		ds = append(ds, d)
	}
	return ds
}

func openModel(t testing.TB, dir string) *checkpoint.Model {
	t.Helper()
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func testTokens(n int, vocab int, seed uint64) []int32 {
	t := make([]int32, n)
	x := seed*2654435761 + 1
	for i := range t {
		x = x*6364136223846793005 + 1442695040888963407
		t[i] = int32((x >> 33) % uint64(vocab))
	}
	return t
}

func emuGGUF(t *testing.T, m *gguf.Model, prec string) *cuda.Backend {
	t.Helper()
	b, err := cuda.NewGGUF(m, emuDevices(t, 1, 1<<30), cuda.Options{Name: "emu", Precision: prec, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func sameBits(a, b []float64) int {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestGGUFF32EqualsSafetensors: the F32 GGUF conversion of a fixture (llama
// and mistral written as llama with llama.cpp's Q/K row permutation, qwen2
// with biases, qwen3 with q/k norms; tied and untied heads; qwen3_moe and
// mixtral with their experts stacked into ffn_*_exps, each uploaded as its
// slice of the stacked tensor; phi3's fused attn_qkv and ffn_up) gives on
// the emulator the NLL of the safetensors model bit for bit, in every
// precision — which it could not if a permutation, norm, bias, expert
// slice or the head were read wrong.
func TestGGUFF32EqualsSafetensors(t *testing.T) {
	for _, a := range []string{"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3"} {
		dir, path := ggufFixture(t, a, nil)
		ck, g := openModel(t, dir), openGGUF(t, path)
		toks := testTokens(60, g.Config.VocabSize, 11)
		for _, prec := range []string{"fp32", "bf16", "fp16"} {
			want, err := cuda.New(ck, emuDevices(t, 1, 1<<30), cuda.Options{Name: "emu", Precision: prec, MaxTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			w := scoreNLL(t, want, toks)
			want.Close()
			got := scoreNLL(t, emuGGUF(t, g, prec), toks)
			if i := sameBits(got, w); i >= 0 {
				t.Errorf("%s %s: GGUF NLL[%d] = %v, safetensors %v", a, prec, i, got[i], w[i])
			}
		}
	}
}

// quantTypes are the ggml types with a decoder other than the float ones.
func quantTypes() []ggml.Type {
	var out []ggml.Type
	for _, typ := range ggml.Types() {
		if typ.Supported() && typ != ggml.F32 && typ != ggml.F16 && typ != ggml.BF16 {
			out = append(out, typ)
		}
	}
	return out
}

// wideFixture has Linear input widths that are multiples of 256, so that
// every block type (the K, IQ and TQ super-blocks too) fits every tensor.
func wideFixture(arch string) func(*fixtures.Options) {
	return func(o *fixtures.Options) {
		o.Vocab, o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 300, 256, 512, 4, 2, 64
		o.Init = fixtures.InitRandom // a tied head of random blocks at the embedding's scale
	}
}

// TestGGUFTypesOnEmu: GGUF files of Go-written blocks (internal/ggufgen:
// no llama.cpp needed) holding every block type package gguf/ggml decodes,
// a different type per tensor (token_embd and the tied head included;
// every type lands in a llama file, with its Q/K permutation, and in an
// untied qwen2 file with biases): (1) the emulator's NLL on the packed
// file equals, bit for bit, its NLL on the same file decoded to F32
// (dq_ggml gives ggml's exact fp32 values; the quantized embedding is
// gathered from its exact fp32 decoding; the tied head is read packed),
// in fp32 and bf16; (2) in fp32 it is within TestSchemesAgainstReference's
// weight-only tolerance of the float64 reference (max |ΔNLL| 1e-4, mean
// 2e-5; docs/cuda.md). Each type's kernel is checked against its decoder
// value by value in TestGGMLKernelMatchesDecoders.
func TestGGUFTypesOnEmu(t *testing.T) {
	_, llama := ggufFixture(t, "llama", wideFixture("llama"))
	_, qwen2 := ggufFixture(t, "qwen2", wideFixture("qwen2"))
	types := quantTypes()
	type file struct {
		name, src string
		off       int
		seen      map[ggml.Type]bool
	}
	// llama: 15 2-D tensors (tied), qwen2: 16 (untied), 2 layers each.
	files := []file{{"llama-a", llama, 0, nil}, {"llama-b", llama, 15, nil}, {"qwen2", qwen2, 7, nil}}
	if testing.Short() {
		files = files[:1]
	}
	covered := map[ggml.Type]bool{}
	for i, f := range files {
		t.Run(f.name, func(t *testing.T) {
			k := f.off
			q := filepath.Join(t.TempDir(), "q.gguf")
			if err := ggufgen.Requantize(f.src, q, uint64(i+1), func(_ string, ne []int64, own ggml.Type) ggml.Type {
				if len(ne) != 2 {
					return own
				}
				typ := types[k%len(types)]
				k++
				covered[typ] = true
				return typ
			}); err != nil {
				t.Fatal(err)
			}
			deq := filepath.Join(t.TempDir(), "deq.gguf")
			if err := ggufgen.Dequantize(q, deq); err != nil {
				t.Fatal(err)
			}
			mq, md := openGGUF(t, q), openGGUF(t, deq)
			toks := testTokens(60, mq.Config.VocabSize, uint64(i+3))
			var en []float64
			for _, prec := range []string{"fp32", "bf16"} {
				got, want := scoreNLL(t, emuGGUF(t, mq, prec), toks), scoreNLL(t, emuGGUF(t, md, prec), toks)
				if j := sameBits(got, want); j >= 0 {
					t.Errorf("%s: packed NLL[%d] = %v, decoded F32 file %v", prec, j, got[j], want[j])
				}
				if prec == "fp32" {
					en = got
				}
			}
			ref, err := reference.NewGGUF(mq, reference.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			rn := scoreNLL(t, ref, toks)
			maxd, meand := 0.0, 0.0
			for j := range rn {
				d := math.Abs(rn[j] - en[j])
				maxd, meand = max(maxd, d), meand+d/float64(len(rn))
			}
			t.Logf("%-8s fp32 vs reference: max |ΔNLL| %.3g, mean %.3g (PPL %.4g)", f.name, maxd, meand, math.Exp(mean(rn)))
			if !(maxd <= 1e-4 && meand <= 2e-5) {
				t.Errorf("fp32 vs reference: max |ΔNLL| %.3g mean %.3g, tolerance 1e-4, 2e-5", maxd, meand)
			}
		})
	}
	if !testing.Short() && len(covered) != len(types) {
		t.Errorf("the files hold %d of the %d types", len(covered), len(types))
	}
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// TestGGUFRopeFreqs: llama.cpp's rope_freqs.weight factors (llama3 RoPE
// without qppl's metadata) reach the emulator's RoPE tables as they reach
// the reference's: both agree to fp32 precision, and the NLL differs from
// the same file without the factors.
func TestGGUFRopeFreqs(t *testing.T) {
	_, path := ggufFixture(t, "llama", nil)
	g := openGGUF(t, path)
	d := g.Spec.HeadDim / 2
	factors := make([]float32, d)
	for i := range factors {
		factors[i] = 1 + 7*float32(i)/float32(d) // strong enough to move the NLL
	}
	// rope_freqs.weight without qppl's metadata: applied as llama.cpp does.
	scaled := filepath.Join(t.TempDir(), "freqs.gguf")
	if err := ggufgen.Edit(path, scaled, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		kvs = slices.DeleteFunc(kvs, func(kv gguf.KV) bool { return kv.Key == gguf.RopeScalingKey })
		ts = slices.DeleteFunc(ts, func(w gguf.WriteTensor) bool { return w.Name == "rope_freqs.weight" })
		return kvs, append(ts, gguf.WriteTensor{Name: "rope_freqs.weight", Dims: []int64{int64(d)}, Type: gguf.F32, Data: ggufgen.F32Bytes(factors)})
	}); err != nil {
		t.Fatal(err)
	}
	ms := openGGUF(t, scaled)
	toks := testTokens(60, g.Config.VocabSize, 5)
	ref, err := reference.NewGGUF(ms, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	rn, en, plain := scoreNLL(t, ref, toks), scoreNLL(t, emuGGUF(t, ms, "fp32"), toks), scoreNLL(t, emuGGUF(t, g, "fp32"), toks)
	maxd, moved := 0.0, 0.0
	for j := range rn {
		maxd, moved = max(maxd, math.Abs(rn[j]-en[j])), max(moved, math.Abs(plain[j]-en[j]))
	}
	if !(maxd <= 1e-4) || !(moved > 1e-3) {
		t.Errorf("emu vs reference with rope_freqs: max |ΔNLL| %.3g (want ≤ 1e-4); the factors move the NLL by %.3g (want > 1e-3)", maxd, moved)
	}
}

// TestGGUFUnusedTensors: cuda.NewGGUF checks with gguf.Usage that it read
// every tensor: a loader that skipped one would be refused naming it.
// OpenModel refuses a tensor the architecture does not use, so this
// drives the check directly: a usage recorder that saw the backend load
// holds no unread tensor, and one started after it names them all.
func TestGGUFUnusedTensors(t *testing.T) {
	_, path := ggufFixture(t, "qwen2", nil)
	g := openGGUF(t, path)
	u := g.TrackUsage()
	emuGGUF(t, g, "fp32")
	u.Stop()
	if un := u.Unused(); len(un) != 0 {
		t.Errorf("after NewGGUF: unread tensors %v", un)
	}
	late := g.TrackUsage()
	late.Stop()
	err := late.Check("emu")
	if !errors.Is(err, checkpoint.ErrUnused) || !strings.Contains(err.Error(), "blk.0.attn_q.bias") || !strings.Contains(err.Error(), path) {
		t.Errorf("Check with nothing read: %v", err)
	}
}

// TestQwen35GGUFOnEmu: the F32 GGUF conversions of the qwen3_5 and
// qwen3_5_moe fixtures (llama.cpp's layout: gains 1 + w, −exp(A_log),
// tiled value heads — out_proj's columns are moved on the host —, conv1d
// squeezed, stacked experts) run on the emulator: in fp32 within the
// weight-only tolerance of docs/cuda.md (max |ΔNLL| 1e-4, mean 2e-5) of
// the float64 reference on the same file, and against the emulator on
// the safetensors model the difference is the stored float32 transforms'
// (logged).
func TestQwen35GGUFOnEmu(t *testing.T) {
	for _, a := range []string{"qwen3_5", "qwen3_5_moe"} {
		t.Run(a, func(t *testing.T) {
			dir, path := ggufFixture(t, a, func(o *fixtures.Options) { o.Config = nil })
			g := openGGUF(t, path)
			toks := testTokens(48, g.Config.VocabSize, 5)
			rb, err := reference.NewGGUF(g, reference.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ref := scoreNLL(t, rb, toks)
			rb.Close()
			got := scoreNLL(t, emuGGUF(t, g, "fp32"), toks)
			var maxd, sum float64
			for i := range got {
				d := math.Abs(got[i] - ref[i])
				maxd, sum = max(maxd, d), sum+d
			}
			mean := sum / float64(len(got))
			ck := openModel(t, dir)
			sb, err := cuda.New(ck, emuDevices(t, 1, 1<<30), cuda.Options{Name: "emu", Precision: "fp32", MaxTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			st := scoreNLL(t, sb, toks)
			sb.Close()
			var maxs float64
			for i := range got {
				maxs = max(maxs, math.Abs(got[i]-st[i]))
			}
			t.Logf("%s fp32: emu GGUF vs reference GGUF max |ΔNLL| %.3g mean %.3g; vs emu safetensors max %.3g", a, maxd, mean, maxs)
			if !(maxd <= 1e-4) || !(mean <= 2e-5) {
				t.Fatalf("emu vs reference on the GGUF: max %g mean %g", maxd, mean)
			}
			if !(maxs <= 1e-4) {
				t.Fatalf("emu on the GGUF vs emu on the safetensors model: max %g", maxs)
			}
		})
	}
}

// TestGGUFGptOssOnEmu: the F32 GGUF conversion of a random gpt_oss
// fixture (its own sliding window and YaRN; sinks, router bias, experts
// split by llama.cpp's converter into ffn_gate_exps / ffn_up_exps with
// their biases) gives on the emulator the NLL of the safetensors model bit
// for bit in fp32 and bf16 — which it could not if gate and up were
// re-interleaved wrong (e.g. swapped halves), or a bias, sink or the
// router bias were misread — and is within the weight-only tolerance of
// the float64 reference on the same file (max |ΔNLL| 1e-4, mean 2e-5).
func TestGGUFGptOssOnEmu(t *testing.T) {
	dir, path := ggufFixture(t, "gpt_oss", func(o *fixtures.Options) {
		o.Config = nil // its own window and YaRN
		o.Init = fixtures.InitRandom
	})
	ck, g := openModel(t, dir), openGGUF(t, path)
	toks := testTokens(60, g.Config.VocabSize, 13)
	var got32 []float64
	for _, prec := range []string{"fp32", "bf16"} {
		want, err := cuda.New(ck, emuDevices(t, 1, 1<<30), cuda.Options{Name: "emu", Precision: prec, MaxTokens: 64})
		if err != nil {
			t.Fatal(err)
		}
		w := scoreNLL(t, want, toks)
		want.Close()
		got := scoreNLL(t, emuGGUF(t, g, prec), toks)
		if i := sameBits(got, w); i >= 0 {
			t.Errorf("%s: GGUF NLL[%d] = %v, safetensors %v", prec, i, got[i], w[i])
		}
		if prec == "fp32" {
			got32 = got
		}
	}
	rb, err := reference.NewGGUF(g, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := scoreNLL(t, rb, toks)
	var maxd, sum float64
	for i := range ref {
		d := math.Abs(got32[i] - ref[i])
		maxd, sum = max(maxd, d), sum+d
	}
	mean := sum / float64(len(ref))
	t.Logf("gpt_oss fp32: emu GGUF vs reference GGUF max |ΔNLL| %.3g mean %.3g", maxd, mean)
	if !(maxd <= 1e-4) || !(mean <= 2e-5) {
		t.Fatalf("emu vs reference on the GGUF: max %g mean %g", maxd, mean)
	}
}
