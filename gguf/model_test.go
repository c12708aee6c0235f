package gguf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	archpkg "github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/reference"
)

// ggufFamilies are the Hugging Face families qppl converts to GGUF (every
// declared GGUF architecture; mixtral is written as llama with experts).
var ggufFamilies = []string{"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3"}

// writeFixture writes a fixture model of arch into a temporary directory.
func writeFixture(t *testing.T, arch string, edit func(*fixtures.Options)) string {
	t.Helper()
	o, err := fixtures.Defaults(arch)
	if err != nil {
		t.Fatal(err)
	}
	// Full attention: llama.cpp's llama/qwen2/qwen3 graphs have no sliding
	// window (phi3's is disabled), so Convert refuses a model that has one;
	// llama.cpp's qwen3moe gives every layer experts (no mlp_only_layers).
	o.Config = map[string]any{"sliding_window": nil, "use_sliding_window": false}
	if arch == "qwen3_moe" {
		o.Config["mlp_only_layers"] = []int{}
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
	// general.name "qppl-fixture", not the directory's name: libllama's
	// vocabulary loader fails (_Map_base::at) on a phi3 file named "phi3"
	// whose vocabulary lacks Phi-3's own special tokens (observed with
	// @node-llama-cpp/linux-x64 3.22.1).
	if err := gguf.ConvertFile(dir, out, gguf.ConvertOptions{Type: typ, Name: "qppl-fixture"}); err != nil {
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
	m, err := archpkg.OpenDir(dir)
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
	for _, arch := range ggufFamilies {
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
	ck, err := archpkg.OpenDir(dir)
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

// TestMain removes the llama.cpp helper's build directory after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if helperVal != nil {
		os.RemoveAll(filepath.Dir(helperVal.Bin))
	}
	os.Exit(code)
}

// splitFile rewrites a GGUF file as n parts PREFIX-0000k-of-0000n.gguf the
// way llama.cpp's gguf-split does (metadata in the first part, split.* keys
// in every part, tensors spread in order) and returns the first part's path.
func splitFile(t *testing.T, path string, n int, edit func(part int, kvs []gguf.KV) []gguf.KV) string {
	t.Helper()
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	src := m.Files[0]
	var ts []gguf.WriteTensor
	for _, ti := range src.Tensors {
		raw, err := src.ReadRaw(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: raw})
	}
	dir := t.TempDir()
	per := (len(ts) + n - 1) / n
	first := ""
	for k := 0; k < n; k++ {
		kvs := []gguf.KV{{Key: "split.no", Value: gguf.Uint16Value(uint16(k))}, {Key: "split.count", Value: gguf.Uint16Value(uint16(n))},
			{Key: "split.tensors.count", Value: gguf.Int32Value(int32(len(ts)))}}
		if k == 0 {
			kvs = append(src.KVs, kvs...)
		}
		if edit != nil {
			kvs = edit(k, kvs)
		}
		part := ts[min(k*per, len(ts)):min((k+1)*per, len(ts))]
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.gguf", k+1, n))
		if k == 0 {
			first = p
		}
		fh, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.Write(fh, kvs, part); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	return first
}

// TestSplitModel: a model split in 3 parts scores as the single file, from
// any part's name; lying split metadata and a missing part are refused.
func TestSplitModel(t *testing.T) {
	dir := writeFixture(t, "qwen2", nil)
	single := convert(t, dir, gguf.F32)
	ws := testWindows(512)[:1]
	want := ggufNLL(t, single, gguf.Options{}, ws)
	first := splitFile(t, single, 3, nil)
	for _, p := range []string{first, strings.Replace(first, "00001-of", "00003-of", 1)} {
		got := ggufNLL(t, p, gguf.Options{}, ws)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: NLL[%d] %v, single file %v", p, i, got[i], want[i])
			}
		}
	}
	lie := splitFile(t, single, 2, func(part int, kvs []gguf.KV) []gguf.KV {
		if part == 1 {
			kvs[0].Value = gguf.Uint16Value(0)
		}
		return kvs
	})
	if _, err := gguf.OpenModel(lie, gguf.Options{}); !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "split.no") {
		t.Fatalf("lying split.no: %v", err)
	}
	os.Remove(strings.Replace(first, "00001-of", "00002-of", 1))
	if _, err := gguf.OpenModel(first, gguf.Options{}); err == nil || !strings.Contains(err.Error(), "00002-of-00003") {
		t.Fatalf("missing part: %v", err)
	}
	// A part opened under a plain name is refused.
	plain := filepath.Join(t.TempDir(), "plain.gguf")
	data, _ := os.ReadFile(strings.Replace(first, "00001-of", "00003-of", 1))
	os.WriteFile(plain, data, 0o644)
	if _, err := gguf.OpenModel(plain, gguf.Options{}); !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "split") {
		t.Fatalf("part under a plain name: %v", err)
	}
}

// rewrite copies a GGUF file with edited metadata and tensors.
func rewrite(t *testing.T, path string, edit func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	src, err := gguf.Open(f, st.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []gguf.WriteTensor
	for _, ti := range src.Tensors {
		raw, err := src.ReadRaw(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: raw})
	}
	kvs, ts := edit(append([]gguf.KV(nil), src.KVs...), ts)
	out := filepath.Join(t.TempDir(), "edited.gguf")
	fh, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := gguf.Write(fh, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return out
}

func setKV(kvs []gguf.KV, key string, v gguf.Value) []gguf.KV {
	for i := range kvs {
		if kvs[i].Key == key {
			kvs[i].Value = v
			return kvs
		}
	}
	return append(kvs, gguf.KV{Key: key, Value: v})
}

func dropKV(kvs []gguf.KV, key string) []gguf.KV {
	for i := range kvs {
		if kvs[i].Key == key {
			return append(kvs[:i], kvs[i+1:]...)
		}
	}
	return kvs
}

// TestModelRefusals: metadata and tensors that do not describe a model
// qppl evaluates exactly are refused naming the file and the key or tensor.
func TestModelRefusals(t *testing.T) {
	path := convert(t, writeFixture(t, "llama", nil), gguf.F32)
	cases := []struct {
		name  string
		edit  func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
		unsup bool
		want  string
	}{
		{"unknown arch", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "general.architecture", gguf.StringValue("gemma")), ts
		}, true, "gemma"},
		{"no arch", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return dropKV(k, "general.architecture"), ts
		}, false, "general.architecture"},
		{"no eps", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return dropKV(k, "llama.attention.layer_norm_rms_epsilon"), ts
		}, false, "layer_norm_rms_epsilon"},
		{"string block count", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.block_count", gguf.StringValue("2")), ts
		}, false, "llama.block_count"},
		{"more layers than tensors", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.block_count", gguf.Uint32Value(3)), ts
		}, false, "blk.2"},
		{"partial rotary", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.rope.dimension_count", gguf.Uint32Value(8)), ts
		}, true, "rope.dimension_count"},
		{"yarn", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			k = dropKV(k, gguf.RopeScalingKey)
			return setKV(k, "llama.rope.scaling.type", gguf.StringValue("yarn")), ts[1:]
		}, true, "yarn"},
		{"lying rope scaling", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, gguf.RopeScalingKey, gguf.StringValue(`{"rope_type":"llama3","factor":4,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":64}`)), ts
		}, false, "rope_freqs.weight"},
		{"extra tensor", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return k, append(ts, gguf.WriteTensor{Name: "blk.0.ffn_gate_exps.weight", Dims: []int64{4}, Type: gguf.F32, Data: make([]byte, 16)})
		}, true, "blk.0.ffn_gate_exps.weight"},
		{"missing tensor", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			var out []gguf.WriteTensor
			for _, x := range ts {
				if x.Name != "blk.1.ffn_down.weight" {
					out = append(out, x)
				}
			}
			return k, out
		}, false, "blk.1.ffn_down.weight"},
		{"wrong shape", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == "blk.0.attn_v.weight" {
					ts[i].Dims = []int64{ts[i].Dims[1], ts[i].Dims[0]}
				}
			}
			return k, ts
		}, false, "blk.0.attn_v.weight"},
		{"zero heads", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.attention.head_count", gguf.Uint32Value(0)), ts
		}, false, "llama.attention.head_count"},
		{"zero width", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.embedding_length", gguf.Uint32Value(0)), ts
		}, false, "llama.embedding_length"},
		{"zero kv heads", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.attention.head_count_kv", gguf.Uint32Value(0)), ts
		}, false, "num_key_value_heads"},
		{"negative eps", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.attention.layer_norm_rms_epsilon", gguf.Float32Value(-1)), ts
		}, false, "eps"},
		{"huge layers", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.block_count", gguf.Uint64Value(1<<40)), ts
		}, false, "llama.block_count"},
		{"vocab mismatch", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return setKV(k, "llama.vocab_size", gguf.Uint32Value(7)), ts
		}, false, "vocab_size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := rewrite(t, path, c.edit)
			_, err := gguf.OpenModel(p, gguf.Options{})
			if err == nil {
				t.Fatal("accepted")
			}
			if c.unsup && !errors.Is(err, gguf.ErrUnsupported) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want the file and %q (unsupported %v)", err, c.want, c.unsup)
			}
		})
	}
}

// TestRopeFreqsAsLlamaCpp: without qppl's exact llama3 parameters,
// rope_freqs.weight is applied as llama.cpp applies it; the float32
// factors then move the PPL only slightly off transformers' llama3 rule.
func TestRopeFreqsAsLlamaCpp(t *testing.T) {
	dir := writeFixture(t, "llama", nil)
	path := rewrite(t, convert(t, dir, gguf.F32), func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return dropKV(k, gguf.RopeScalingKey), ts
	})
	ws := testWindows(512)
	want := safetensorsNLL(t, dir, ws)
	got := ggufNLL(t, path, gguf.Options{}, ws)
	d := math.Abs(ppl(got) - ppl(want))
	t.Logf("llama.cpp-style rope_freqs: PPL %.15g vs transformers llama3 %.15g (|Δ| %.3g)", ppl(got), ppl(want), d)
	if !(d/ppl(want) < 1e-6) {
		t.Fatalf("PPL %v vs %v", ppl(got), ppl(want))
	}
}
