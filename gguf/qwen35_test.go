package gguf_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	archpkg "github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/reference"
)

// qwen35Archs are the Qwen3.5 fixtures and their GGUF architectures.
var qwen35Archs = []struct{ fixture, gguf string }{{"qwen3_5", "qwen35"}, {"qwen3_5_moe", "qwen35moe"}}

// qwen35Fixture writes a Qwen3.5 fixture (multimodal layout: the text
// decoder under model.language_model., a token vision tower), optionally
// edited.
func qwen35Fixture(t *testing.T, arch string, edit func(*fixtures.Options)) string {
	return writeFixture(t, arch, func(o *fixtures.Options) {
		o.Config = nil
		if edit != nil {
			edit(o)
		}
	})
}

// isOffsetNorm reports the Qwen3_5RMSNorm weights llama.cpp stores as 1 + w.
func isOffsetNorm(name string) bool {
	for _, s := range []string{".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight", ".k_norm.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return strings.HasSuffix(name, "model.norm.weight")
}

// TestQwen35ConvertedTensors: the F32 GGUF of the qwen3_5 and
// qwen3_5_moe fixtures (converted by qppl as llama.cpp's converter does)
// read back through package gguf as the Hugging Face tensors bit for bit
// — value heads un-tiled, conv1d [C, 1, K], experts un-stacked — except
// the two transforms llama.cpp stores lossily: an offset norm's gain is
// float32(1 + w), within half a float32 ulp of 1 + w (and Float64 gives
// exactly s − 1), and A = exp(A_log) is float32(exp(A_log)) exactly
// (DecayRate), within half an ulp of exp(A_log).
func TestQwen35ConvertedTensors(t *testing.T) {
	for _, a := range qwen35Archs {
		t.Run(a.fixture, func(t *testing.T) {
			dir := qwen35Fixture(t, a.fixture, nil)
			path := convert(t, dir, gguf.F32)
			st, err := archpkg.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			spec, err := archpkg.For(st.Config)
			if err != nil {
				t.Fatal(err)
			}
			m, err := gguf.OpenModel(path, gguf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Arch != a.gguf {
				t.Fatalf("general.architecture %q, want %q", m.Arch, a.gguf)
			}
			lossy, exact := 0, 0
			for _, ts := range spec.DenseWeights() {
				want, _, err := st.ReadFloat64(ts.Name)
				if err != nil {
					t.Fatal(err)
				}
				name := ts.Name
				if name != archpkg.LMHeadName {
					name = "model." + strings.TrimPrefix(name, spec.Prefix)
				}
				var got []float64
				if len(ts.Shape) == 2 {
					l, err := m.Linear(strings.TrimSuffix(name, ".weight"))
					if err != nil {
						t.Fatal(err)
					}
					got = make([]float64, len(want))
					if err := l.Dequantize(got); err != nil {
						t.Fatal(err)
					}
				} else {
					var shape []int
					if got, shape, err = m.Float64(name); err != nil {
						t.Fatal(err)
					}
					if !equalInts(shape, ts.Shape) {
						t.Fatalf("%s: shape %v, want %v", name, shape, ts.Shape)
					}
				}
				switch {
				case isOffsetNorm(name):
					for i, w := range want {
						s := float64(float32(1 + w))
						if got[i] != s-1 || 1+got[i] != s {
							t.Fatalf("%s[%d]: %v, want float32(1+w)-1 = %v", name, i, got[i], s-1)
						}
						if math.Abs(s-(1+w)) > math.Abs(1+w)*0x1p-24 {
							t.Fatalf("%s[%d]: gain %v is not 1+w = %v rounded", name, i, s, 1+w)
						}
					}
					lossy++
				case strings.HasSuffix(name, ".A_log"):
					rate, ok, err := m.DecayRate(name)
					if err != nil || !ok {
						t.Fatalf("%s: DecayRate: %v %v", name, ok, err)
					}
					for i, w := range want {
						if rate[i] != float64(float32(math.Exp(w))) {
							t.Fatalf("%s[%d]: A = %v, want float32(exp(A_log)) = %v", name, i, rate[i], float32(math.Exp(w)))
						}
						if math.Abs(got[i]-math.Log(rate[i])) != 0 {
							t.Fatalf("%s[%d]: Float64 %v, want log(A) %v", name, i, got[i], math.Log(rate[i]))
						}
					}
					lossy++
				default:
					for i := range want {
						if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
							t.Fatalf("%s[%d]: %v, safetensors %v", name, i, got[i], want[i])
						}
					}
					exact++
				}
			}
			t.Logf("%d tensors bit for bit, %d stored as llama.cpp's float32 transforms", exact, lossy)
			if lossy == 0 || exact < 10 {
				t.Fatalf("compared %d exact and %d transformed tensors", exact, lossy)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestQwen35F32GGUFNLL: the reference on the F32 GGUF against the
// safetensors model: the per-token NLL differs only through llama.cpp's
// two float32 transforms (norm gains 1 + w and A = exp(A_log) rounded to
// float32), measured here and bounded.
func TestQwen35F32GGUFNLL(t *testing.T) {
	for _, a := range qwen35Archs {
		t.Run(a.fixture, func(t *testing.T) {
			dir := qwen35Fixture(t, a.fixture, nil)
			ws := testWindows(512)
			want := safetensorsNLL(t, dir, ws)
			got := ggufNLL(t, convert(t, dir, gguf.F32), gguf.Options{}, ws)
			d := maxAbsDiff(got, want)
			rel := math.Abs(ppl(got)-ppl(want)) / ppl(want)
			t.Logf("%s: PPL safetensors %.15g, GGUF %.15g (rel %.3g), max |ΔNLL| %.3g over %d tokens", a.fixture, ppl(want), ppl(got), rel, d, len(got))
			// Measured: qwen3_5 5.8e-6 (PPL rel 1.3e-7), qwen3_5_moe 7.7e-6
			// (9.8e-11) on these random fixtures (PPL ≈ 4e8: large logits
			// amplify the 2^-24 relative roundings).
			if !(d <= 2e-5) || !(rel <= 5e-7) {
				t.Fatalf("GGUF NLL differs by up to %g (PPL rel %g)", d, rel)
			}
			if d == 0 {
				t.Fatalf("no difference at all: the float32 transforms should show")
			}
		})
	}
}

// storedGetter reads an all-F32 qwen35 GGUF file's tensors by their
// Hugging Face names as stored — no transform undone (gains 1 + w,
// −exp(A_log), tiled value heads, conv1d [C, K]) — for the oracle's
// LlamaCppForm; an expert is its slice of the stacked tensor.
func storedGetter(t *testing.T, path string) oracle.Getter {
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := m.Spec
	m.Close()
	f := openRaw(t, path)
	return func(name string) ([]float64, []int, error) {
		g, e, ok := gguf.Qwen35Name(spec, name)
		ti, found := f.Tensor(g)
		if !ok || !found {
			return nil, nil, fmt.Errorf("no tensor for %q", name)
		}
		if ti.Type != gguf.F32 {
			return nil, nil, fmt.Errorf("%s is %s, want F32", g, ti.Type)
		}
		raw, err := f.ReadRaw(g)
		if err != nil {
			return nil, nil, err
		}
		dims := ti.Dims
		if e >= 0 {
			n := int(dims[0] * dims[1])
			raw, dims = raw[4*e*n:4*(e+1)*n], dims[:2]
		}
		v := make([]float64, len(raw)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		shape := make([]int, len(dims))
		for i, d := range dims {
			shape[len(dims)-1-i] = int(d)
		}
		if len(shape) == 1 && strings.HasSuffix(g, ".ffn_gate_inp_shexp.weight") {
			shape = []int{1, shape[0]} // ggml_n_dims dropped the 1
		}
		return v, shape, nil
	}
}

// oracleWindowNLL is the oracle's per-token NLL of the windows (targets First…).
func oracleWindowNLL(t *testing.T, cfg *checkpoint.Config, get oracle.Getter, ws []backends.Window, opt oracle.Options) []float64 {
	t.Helper()
	var out []float64
	for _, w := range ws {
		lp, err := oracle.LogProbs(cfg, get, w.Tokens, opt)
		if err != nil {
			t.Fatal(err)
		}
		for p := w.First; p < len(w.Tokens); p++ {
			out = append(out, -lp[p-1][w.Tokens[p]])
		}
	}
	return out
}

// TestQwen35OracleOnStoredForm: the oracle, reading the F32 GGUF's
// tensors exactly as llama.cpp stores them (gains, −exp(A_log), tiled
// value heads; its LlamaCppForm), equals qppl's reference on the file
// (which undoes the reorders and uses the stored values) to 1e-9 per
// token; and the oracle on the safetensors model equals the reference
// there, so the GGUF gap of TestQwen35F32GGUFNLL is the stored values'.
// Reading the stored file as Hugging Face form instead (no LlamaCppForm)
// is far off.
func TestQwen35OracleOnStoredForm(t *testing.T) {
	for _, a := range qwen35Archs {
		t.Run(a.fixture, func(t *testing.T) {
			dir := qwen35Fixture(t, a.fixture, func(o *fixtures.Options) { o.Vocab = 300 })
			path := convert(t, dir, gguf.F32)
			ws := testWindows(300)[:2]
			for i := range ws {
				ws[i].Tokens = ws[i].Tokens[:24]
			}
			m, err := gguf.OpenModel(path, gguf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := m.Config
			m.Close()
			ref := ggufNLL(t, path, gguf.Options{}, ws)
			orc := oracleWindowNLL(t, cfg, storedGetter(t, path), ws, oracle.Options{LlamaCppForm: true})
			d := maxAbsDiff(ref, orc)
			t.Logf("reference on the GGUF vs oracle on its stored tensors: max |ΔNLL| %.3g over %d tokens", d, len(ref))
			if !(d <= 1e-9) {
				t.Fatalf("reference and oracle differ by %g on the GGUF file", d)
			}
			plain := oracleWindowNLL(t, cfg, storedGetter(t, path), ws, oracle.Options{})
			if d := maxAbsDiff(ref, plain); !(d > 1e-3) {
				t.Fatalf("the stored form read as Hugging Face form differs by only %g: the test cannot see the transforms", d)
			}
			st, err := archpkg.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			get := func(name string) ([]float64, []int, error) { return st.ReadFloat64(name) }
			so := oracleWindowNLL(t, st.Config, get, ws, oracle.Options{})
			sr := safetensorsNLL(t, dir, ws)
			t.Logf("safetensors: reference vs oracle %.3g; oracle safetensors vs oracle GGUF %.3g", maxAbsDiff(sr, so), maxAbsDiff(so, orc))
			if d := maxAbsDiff(sr, so); !(d <= 1e-9) {
				t.Fatalf("reference and oracle differ by %g on the safetensors model", d)
			}
		})
	}
}

// TestLlamaCppQwen35: libllama loads qppl's F32 conversions of the
// qwen3_5 and qwen3_5_moe fixtures and its own per-token NLL agrees with
// qppl's float64 reference on the same windows to float32 precision (a
// wrong name, hyperparameter, transform or value-head order would move
// it by orders of magnitude).
func TestLlamaCppQwen35(t *testing.T) {
	h := llamaHelper(t)
	for _, a := range qwen35Archs {
		t.Run(a.fixture, func(t *testing.T) {
			r := llamaAgreeF32(t, h, a.gguf+" F32", qwen35Fixture(t, a.fixture, nil), 3)
			if !(r.maxDiff < 1e-3) {
				t.Fatalf("llama.cpp's NLL differs from qppl's by up to %g", r.maxDiff)
			}
		})
	}
}

// TestLlamaCppQwen35Quantized: llama_model_quantize makes quantized files
// from qppl's F32 conversions (Linear widths 256, so the K and IQ types
// are used where the rows allow); for each, package gguf opens it (value
// heads, stacked quantized experts), qppl's reference NLL with its own
// decoders equals the oracle's float64 forward of the weights as libggml
// dequantizes them, read in llama.cpp's stored form, to 1e-9 per token,
// and llama.cpp's own NLL on the quantized file is logged beside it.
func TestLlamaCppQwen35Quantized(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: quantizes with llama.cpp")
	}
	h := llamaHelper(t)
	types := map[string]bool{"Q4_0": true, "Q8_0": true, "Q4_K_M": true, "Q6_K": true, "IQ4_XS": true, "Q5_K_S": true, "BF16": true}
	for _, a := range qwen35Archs {
		t.Run(a.fixture, func(t *testing.T) {
			dir := qwen35Fixture(t, a.fixture, func(o *fixtures.Options) { o.Hidden, o.Intermediate = 256, 256 })
			f32 := convert(t, dir, gguf.F32)
			ws := demoWindows(t, dir, 2, 32)
			base := ggufNLL(t, f32, gguf.Options{}, ws)
			t.Logf("%s F32: PPL %.6f", a.gguf, ppl(base))
			n := 0
			for _, ft := range llamacpp.FileTypes() {
				if !types[ft.Name] {
					continue
				}
				q := filepath.Join(t.TempDir(), ft.Name+".gguf")
				if err := h.Quantize(f32, q, ft.FType); err != nil {
					t.Fatalf("%s: %v", ft.Name, err)
				}
				m, err := gguf.OpenModel(q, gguf.Options{})
				if err != nil {
					t.Fatalf("%s: %v", ft.Name, err)
				}
				layers, _ := m.TypeBreakdown()
				cfg := m.Config
				m.Close()
				got := ggufNLL(t, q, gguf.Options{}, ws)
				deq := ggmlDequantized(t, h, q)
				// the oracle reruns every prefix: the first window only
				orc := oracleWindowNLL(t, cfg, storedGetter(t, deq), ws[:1], oracle.Options{LlamaCppForm: true})
				d := maxAbsDiff(got[:len(orc)], orc)
				l := llamaNLL(t, h, q, ws)
				t.Logf("%-7s %s: qppl PPL %.6f (oracle on ggml-dequantized: max |ΔNLL| %.2g), llama.cpp %.6f (rel %.2g, max |ΔNLL| %.3g)",
					ft.Name, shares(layers), ppl(got), d, ppl(l), math.Abs(ppl(l)-ppl(got))/ppl(got), maxAbsDiff(got, l))
				if !(d <= 1e-9) {
					t.Errorf("%s: reference differs from the oracle on ggml-dequantized weights by %g", ft.Name, d)
				}
				if !(math.Abs(ppl(l)-ppl(got))/ppl(got) < 0.05) {
					t.Errorf("%s: llama.cpp PPL %v vs qppl %v", ft.Name, ppl(l), ppl(got))
				}
				n++
			}
			if n != len(types) {
				t.Fatalf("%d file types checked, want %d", n, len(types))
			}
		})
	}
}

// TestQwen35Refusals: qwen35/qwen35moe files whose metadata or tensors do
// not describe the model are refused when opened (or, for a stored A that
// −exp cannot give, when the reference reads it), naming the file and the
// key or tensor, with gguf.ErrFormat or gguf.ErrUnsupported (exit 2).
func TestQwen35Refusals(t *testing.T) {
	type edit = func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
	kv := func(key string, v gguf.Value) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) { return setKV(k, key, v), ts }
	}
	drop := func(key string) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) { return dropKV(k, key), ts }
	}
	tensor := func(name string, f func(*gguf.WriteTensor) bool) edit {
		return func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			var out []gguf.WriteTensor
			for _, x := range ts {
				if x.Name != name || f(&x) {
					out = append(out, x)
				}
			}
			return k, out
		}
	}
	for _, a := range qwen35Archs {
		path := convert(t, qwen35Fixture(t, a.fixture, nil), gguf.F32)
		p := a.gguf + "."
		cases := []struct {
			name  string
			edit  edit
			unsup bool
			want  string
		}{
			{"no conv_kernel", drop(p + "ssm.conv_kernel"), false, p + "ssm.conv_kernel"},
			{"no state_size", drop(p + "ssm.state_size"), false, p + "ssm.state_size"},
			{"zero group_count", kv(p+"ssm.group_count", gguf.Uint32Value(0)), false, p + "ssm.group_count"},
			{"inner not a multiple", kv(p+"ssm.inner_size", gguf.Uint32Value(63)), false, p + "ssm.inner_size"},
			{"odd rotary", kv(p+"rope.dimension_count", gguf.Uint32Value(7)), false, p + "rope.dimension_count"},
			{"rotary past head", kv(p+"rope.dimension_count", gguf.Uint32Value(64)), false, p + "rope.dimension_count"},
			{"interval 0", kv(p+"full_attention_interval", gguf.Uint32Value(0)), false, p + "full_attention_interval"},
			{"interval moves layers", kv(p+"full_attention_interval", gguf.Uint32Value(4)), false, "blk.1.ssm_conv1d.weight"},
			{"sections a string", kv(p+"rope.dimension_sections", gguf.StringValue("11,11,10")), false, p + "rope.dimension_sections"},
			{"mtp blocks", kv(p+"nextn_predict_layers", gguf.Uint32Value(1)), true, p + "nextn_predict_layers"},
			{"recurrent layer list", kv(p+"attention.recurrent_layers", gguf.Uint32Value(1)), true, p + "attention.recurrent_layers"},
			{"yarn", kv(p+"rope.scaling.type", gguf.StringValue("yarn")), true, p + "rope.scaling.type"},
			{"no dt bias", tensor("blk.0.ssm_dt.bias", func(*gguf.WriteTensor) bool { return false }), false, "blk.0.ssm_dt.bias"},
			{"conv not squeezed right", tensor("blk.0.ssm_conv1d.weight", func(x *gguf.WriteTensor) bool { x.Dims = []int64{x.Dims[1], x.Dims[0]}; return true }), false, "blk.0.ssm_conv1d.weight"},
			{"extra tensor", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				return k, append(ts, gguf.WriteTensor{Name: "blk.0.ffn_norm.weight", Dims: []int64{64}, Type: gguf.F32, Data: make([]byte, 256)})
			}, true, "blk.0.ffn_norm.weight"},
			{"attention bias", func(k []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				return k, append(ts, gguf.WriteTensor{Name: "blk.0.attn_q.bias", Dims: []int64{64}, Type: gguf.F32, Data: make([]byte, 256)})
			}, true, "blk.0.attn_q.bias"},
		}
		if a.gguf == "qwen35moe" {
			cases = append(cases,
				struct {
					name  string
					edit  edit
					unsup bool
					want  string
				}{"no expert_count", drop(p + "expert_count"), false, p + "expert_count"},
				struct {
					name  string
					edit  edit
					unsup bool
					want  string
				}{"experts short", tensor("blk.0.ffn_up_exps.weight", func(x *gguf.WriteTensor) bool {
					x.Dims[2]--
					x.Data = x.Data[:len(x.Data)*int(x.Dims[2])/int(x.Dims[2]+1)]
					return true
				}), false, "blk.0.ffn_up_exps.weight"})
		}
		for _, c := range cases {
			t.Run(a.gguf+"/"+c.name, func(t *testing.T) {
				bad := rewrite(t, path, c.edit)
				m, err := gguf.OpenModel(bad, gguf.Options{})
				if err == nil {
					m.Close()
					t.Fatal("opened")
				}
				want := gguf.ErrFormat
				if c.unsup {
					want = gguf.ErrUnsupported
				}
				if !errors.Is(err, want) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want %v naming %s and %q", err, want, bad, c.want)
				}
			})
		}
		t.Run(a.gguf+"/positive ssm_a", func(t *testing.T) {
			bad := rewrite(t, path, tensor("blk.0.ssm_a", func(x *gguf.WriteTensor) bool { putF32(x.Data, 0.5); return true }))
			m, err := gguf.OpenModel(bad, gguf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			_, err = reference.NewGGUF(m, reference.Options{})
			if !errors.Is(err, gguf.ErrFormat) || !strings.Contains(err.Error(), "blk.0.ssm_a") || !strings.Contains(err.Error(), bad) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// TestQwen35MoEFusedExperts: a qwen3_5_moe checkpoint holding its experts
// fused (transformers' experts.gate_up_proj / down_proj) converts to the
// same GGUF tensors, byte for byte, as the per-expert one with the same
// values.
func TestQwen35MoEFusedExperts(t *testing.T) {
	files := map[string]*gguf.File{}
	for _, layout := range []string{fixtures.ExpertsFused, fixtures.ExpertsPerExpert} {
		dir := qwen35Fixture(t, "qwen3_5_moe", func(o *fixtures.Options) { o.Experts = layout })
		files[layout] = openRaw(t, convert(t, dir, gguf.F32))
	}
	a, b := files[fixtures.ExpertsFused], files[fixtures.ExpertsPerExpert]
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%d tensors fused, %d per expert", len(a.Tensors), len(b.Tensors))
	}
	for _, ti := range b.Tensors {
		x, err := a.ReadRaw(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := b.ReadRaw(ti.Name)
		if string(x) != string(y) {
			t.Fatalf("tensor %s differs", ti.Name)
		}
	}
}
