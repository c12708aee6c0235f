package gguf_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/reference"
)

// writeFixture writes a fixture model of arch into a temporary directory.
func writeFixture(t *testing.T, arch string, edit func(*fixtures.Options)) string {
	t.Helper()
	o, err := fixtures.Defaults(arch)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&o)
	}
	dir := filepath.Join(t.TempDir(), arch)
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// convert writes dir as a GGUF file of type typ and returns its path.
func convert(t *testing.T, dir string, typ gguf.Type) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "model-"+typ.String()+".gguf")
	if err := gguf.ConvertFile(dir, out, gguf.ConvertOptions{Type: typ}); err != nil {
		t.Fatal(err)
	}
	return out
}

// testWindows are three windows over a deterministic token stream.
func testWindows(vocab int) []backends.Window {
	var ws []backends.Window
	for w := 0; w < 3; w++ {
		toks := make([]int32, 48)
		for i := range toks {
			toks[i] = int32((i*i*7 + w*31 + 3) % vocab)
		}
		ws = append(ws, backends.Window{Index: w, Tokens: toks, First: 1})
	}
	return ws
}

// nlls scores the windows and returns every per-token NLL.
func nlls(t *testing.T, b backends.Backend, ws []backends.Window) []float64 {
	t.Helper()
	var out []float64
	for _, w := range ws {
		sc, err := b.Score(context.Background(), w, backends.Request{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sc.NLL...)
	}
	return out
}

func safetensorsNLL(t *testing.T, dir string, ws []backends.Window) []float64 {
	t.Helper()
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return nlls(t, b, ws)
}

func ggufNLL(t *testing.T, path string, opt gguf.Options, ws []backends.Window) []float64 {
	t.Helper()
	m, err := gguf.OpenModel(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := reference.NewGGUF(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return nlls(t, b, ws)
}

func ppl(nll []float64) float64 {
	var s float64
	for _, v := range nll {
		s += v
	}
	return math.Exp(s / float64(len(nll)))
}

// TestF32GGUFEqualsSafetensors: the F32 GGUF of a fixture (llama.cpp's
// names, metadata and, for llama/mistral, Q/K row permutation) scores the
// same as the safetensors model in the reference: per-token NLL equal to
// 1e-12 and PPL to 1e-9, for every architecture, tied and untied heads.
func TestF32GGUFEqualsSafetensors(t *testing.T) {
	for _, arch := range fixtures.Architectures() {
		for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16} {
			t.Run(arch+"/"+string(dt), func(t *testing.T) {
				dir := writeFixture(t, arch, func(o *fixtures.Options) { o.DType = dt })
				ws := testWindows(512)
				want := safetensorsNLL(t, dir, ws)
				got := ggufNLL(t, convert(t, dir, gguf.F32), gguf.Options{}, ws)
				if len(got) != len(want) {
					t.Fatalf("%d NLLs, want %d", len(got), len(want))
				}
				maxd := 0.0
				for i := range got {
					maxd = max(maxd, math.Abs(got[i]-want[i]))
				}
				pg, pw := ppl(got), ppl(want)
				t.Logf("PPL safetensors %.15g, GGUF %.15g, max |ΔNLL| %.3g", pw, pg, maxd)
				if !(maxd <= 1e-12) || !(math.Abs(pg-pw) <= 1e-9) {
					t.Fatalf("GGUF PPL %.15g vs safetensors %.15g (max |ΔNLL| %g)", pg, pw, maxd)
				}
			})
		}
	}
}

// TestPermutationMatters: reading a llama file without undoing the Q/K
// permutation gives different logits (so the equality above cannot hold by
// accident), and qwen files are not permuted.
func TestPermutationMatters(t *testing.T) {
	dir := writeFixture(t, "llama", nil)
	path := convert(t, dir, gguf.F32)
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Linear("model.layers.0.self_attn.q_proj")
	if err != nil {
		t.Fatal(err)
	}
	out, in := l.Shape()
	got := make([]float64, out*in)
	if err := l.Dequantize(got); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	want, _, err := ck.ReadFloat64("model.layers.0.self_attn.q_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := m.Float64("model.layers.0.self_attn.q_proj.weight")
	if err != nil {
		t.Fatal(err)
	}
	same, rawSame := true, true
	for i := range want {
		same = same && got[i] == want[i]
		rawSame = rawSame && raw[i] == want[i]
	}
	if !same {
		t.Fatal("unpermuted q_proj differs from the safetensors weight")
	}
	if rawSame {
		t.Fatal("the stored q_proj rows equal the Hugging Face rows: the converter did not permute")
	}
}

func TestPermuteUnpermute(t *testing.T) {
	// 2 heads of width 4, 1 column: HF rows 0..7; GGUF per head stores
	// rows (0,2,1,3) — row h·D+2j+s holds HF row h·D+s·D/2+j.
	w := []float64{0, 1, 2, 3, 4, 5, 6, 7}
	raw := make([]byte, 8)
	for i := range raw {
		raw[i] = byte(i)
	}
	if err := gguf.Permute(raw, 8, 1, 1, 2); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 2, 1, 3, 4, 6, 5, 7}; string(raw) != string(want) {
		t.Fatalf("Permute: %v, want %v", raw, want)
	}
	p := []float64{0, 2, 1, 3, 4, 6, 5, 7}
	if err := gguf.Unpermute(p, 8, 1, 2); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		if p[i] != w[i] {
			t.Fatalf("Unpermute: %v, want %v", p, w)
		}
	}
	if err := gguf.Unpermute(p, 8, 1, 3); err == nil {
		t.Fatal("8 rows over 3 heads accepted")
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
