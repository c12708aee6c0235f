package gguf_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/tokenizer"
)

var (
	helperOnce sync.Once
	helperVal  *llamacpp.Helper
	helperSkip string
	helperErr  error
)

// llamaHelper returns the llama.cpp helper or skips the test saying why.
func llamaHelper(t *testing.T) *llamacpp.Helper {
	t.Helper()
	helperOnce.Do(func() {
		dir, skip := llamacpp.Find()
		if dir == "" {
			helperSkip = skip
			return
		}
		work, err := os.MkdirTemp("", "qppl-llamacpp")
		if err != nil {
			helperErr = err
			return
		}
		helperVal, helperSkip, helperErr = llamacpp.Build(dir, work)
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	if helperVal == nil {
		t.Skip(helperSkip)
	}
	return helperVal
}

// TestTypeTableMatchesGGML: every type id this package knows has ggml's
// name, block size and bytes per block.
func TestTypeTableMatchesGGML(t *testing.T) {
	h := llamaHelper(t)
	var ids []uint32
	for id := uint32(0); id < 64; id++ {
		if gguf.Type(id).Known() {
			ids = append(ids, id)
		}
	}
	traits, err := h.Traits(ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range traits {
		ty := gguf.Type(tr.ID)
		if int64(ty.BlockSize()) != tr.BlockSize || int64(ty.TypeSize()) != tr.TypeSize || !equalFold(ty.String(), tr.Name) {
			t.Errorf("type %d: %s %d/%d, ggml %s %d/%d", tr.ID, ty, ty.BlockSize(), ty.TypeSize(), tr.Name, tr.BlockSize, tr.TypeSize)
		}
	}
	if len(traits) < 30 {
		t.Fatalf("only %d types compared", len(traits))
	}
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 32
		}
		if 'a' <= y && y <= 'z' {
			y -= 32
		}
		if x != y {
			return false
		}
	}
	return true
}

// quantFixture is a fixture whose Linear input widths are multiples of 256,
// so that llama.cpp applies the K and IQ types instead of falling back.
func quantFixture(t *testing.T, arch string) string {
	return writeFixture(t, arch, func(o *fixtures.Options) {
		o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim = 256, 512, 4, 2, 64
	})
}

// demoWindows tokenizes the fixture demo text with the model's tokenizer
// and cuts n windows of ctx tokens (BOS first, as llama-perplexity does).
func demoWindows(t *testing.T, dir string, n, ctx int) []backends.Window {
	t.Helper()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(fixtures.DemoText(), false)
	bos, _ := tok.BOS()
	var ws []backends.Window
	for w := 0; w < n && (w+1)*(ctx-1) <= len(ids); w++ {
		toks := append([]int32{bos}, ids[w*(ctx-1):(w+1)*(ctx-1)]...)
		ws = append(ws, backends.Window{Index: w, Tokens: toks, First: ctx / 2})
	}
	if len(ws) != n {
		t.Fatalf("demo text gives %d windows of %d, want %d", len(ws), ctx, n)
	}
	return ws
}

func llamaWindows(ws []backends.Window) []llamacpp.Window {
	out := make([]llamacpp.Window, len(ws))
	for i, w := range ws {
		out[i] = llamacpp.Window{Tokens: w.Tokens, First: w.First}
	}
	return out
}

func flatten(x [][]float64) []float64 {
	var out []float64
	for _, r := range x {
		out = append(out, r...)
	}
	return out
}

func maxAbsDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// ggmlDequantized rewrites a GGUF file with every tensor dequantized to F32
// by ggml's own to_float (libggml-base), metadata unchanged.
func ggmlDequantized(t *testing.T, h *llamacpp.Helper, path string) string {
	t.Helper()
	work := t.TempDir()
	return rewrite(t, path, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Type == gguf.F32 {
				continue
			}
			n := int64(1)
			for _, d := range ts[i].Dims {
				n *= d
			}
			f, err := h.Dequantize(uint32(ts[i].Type), ts[i].Data, int(n), work)
			if err != nil {
				t.Fatal(err)
			}
			raw := make([]byte, 4*n)
			for k, v := range f {
				putF32(raw[4*k:], v)
			}
			ts[i].Type, ts[i].Data = gguf.F32, raw
		}
		return kvs, ts
	})
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// TestLlamaCppAgreesOnConvertedF32: libllama loads qppl's F32 conversion
// of every architecture, and its own per-token NLL agrees with qppl's
// float64 reference to float32 precision — which it could not if the
// names, metadata or the llama Q/K permutation were wrong.
func TestLlamaCppAgreesOnConvertedF32(t *testing.T) {
	h := llamaHelper(t)
	for _, arch := range ggufFamilies {
		t.Run(arch, func(t *testing.T) {
			a := llamaAgreeF32(t, h, arch+" F32", writeFixture(t, arch, nil), 3)
			if !(a.maxDiff < 1e-3) {
				t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", a.maxDiff)
			}
		})
	}
}

// TestLlamaCppQuantizedTypes quantizes a fixture with llama_model_quantize
// to every file type llama.cpp produces without an importance matrix and,
// per type: the file opens (mixed per-tensor types included); qppl's
// reference NLL on the ggml-dequantized weights is compared with
// llama.cpp's own NLL on the quantized file (llama.cpp quantizes
// activations internally: the gap is logged and bounded loosely); and,
// where package gguf decodes the file's types itself, its reference NLL
// equals the one on ggml-dequantized weights to 1e-9.
func TestLlamaCppQuantizedTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: quantizes to every llama.cpp type")
	}
	h := llamaHelper(t)
	dir := quantFixture(t, "llama")
	f32 := convert(t, dir, gguf.F32)
	ws := demoWindows(t, dir, 2, 64)
	base := ggufNLL(t, f32, gguf.Options{}, ws)
	t.Logf("F32: PPL %.6f", ppl(base))
	for _, ft := range llamacpp.FileTypes() {
		t.Run(ft.Name, func(t *testing.T) {
			q := llamaQuantize(t, h, f32, ft.Name, ft.FType)
			native, err := gguf.OpenModel(q, gguf.Options{})
			switch {
			case err == nil:
				native.Close()
			case errors.Is(err, gguf.ErrUnsupported):
				native = nil
			default:
				t.Fatal(err)
			}
			m, err := gguf.OpenModel(q, gguf.Options{Inspect: true})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := m.Inspect()
			if err != nil {
				t.Fatal(err)
			}
			layers, _ := m.TypeBreakdown()
			m.Close()
			deq := ggmlDequantized(t, h, q)
			ref := ggufNLL(t, deq, gguf.Options{}, ws)
			l := llamaNLL(t, h, q, ws)
			if native != nil {
				// qppl's own decoders: the same NLL as ggml's
				// dequantization, to 1e-9 (bit-identical decoding gives 0).
				got := ggufNLL(t, q, gguf.Options{}, ws)
				if d := maxAbsDiff(got, ref); !(d <= 1e-9) {
					t.Errorf("%s: reference NLL with qppl's decoders differs from ggml-dequantized weights by %g", ft.Name, d)
				}
			} else {
				t.Logf("%s: no Go decoder for its types in this build; compared through ggml's dequantization only", ft.Name)
			}
			t.Logf("%-8s bpw %.4f/%.4f %s %v: qppl PPL %.6f, llama.cpp %.6f (rel %.2g), max |ΔNLL| %.3g",
				ft.Name, rep.BPWLayer, rep.BPWHead, rep.Format, shares(layers), ppl(ref), ppl(l), math.Abs(ppl(l)-ppl(ref))/ppl(ref), maxAbsDiff(ref, l))
			if !(math.Abs(ppl(l)-ppl(ref))/ppl(ref) < 0.05) {
				t.Errorf("llama.cpp PPL %v vs qppl %v", ppl(l), ppl(ref))
			}
		})
	}
}

func shares(s []gguf.TypeShare) string {
	out := ""
	for _, x := range s {
		out += fmt.Sprintf("%s×%d ", x.Type, x.Tensors)
	}
	return out
}
