package reference

import (
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// TestGGUFRowDecode: the Linears of a GGUF file (llama, so q and k carry
// llama.cpp's row interleave; tied and untied heads; F16 and the quantized
// mixes Q8_0 and Q4_K_M) decode by rows straight into the product's
// panels: no whole-Linear scratch buffer is allocated, every row range
// gives Dequantize's bits, and every log-prob has the bits of the forward
// pass that decodes each Linear whole (checkRowDecode).
func TestGGUFRowDecode(t *testing.T) {
	for _, tied := range []bool{false, true} {
		o, err := fixtures.Defaults("llama")
		if err != nil {
			t.Fatal(err)
		}
		o.Vocab, o.Init, o.Tied = 300, fixtures.InitRandom, tied
		o.Config = map[string]any{"sliding_window": nil, "use_sliding_window": false}
		dir := filepath.Join(t.TempDir(), "llama")
		if err := fixtures.Write(dir, o); err != nil {
			t.Fatal(err)
		}
		for _, ft := range []gguf.ConvertOptions{{Type: gguf.F16}, {FileType: "Q8_0"}, {FileType: "Q4_K_M"}} {
			name := ft.FileType
			if name == "" {
				name = ft.Type.String()
			}
			t.Run(name+map[bool]string{false: "-untied", true: "-tied"}[tied], func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "model.gguf")
				if err := gguf.ConvertFile(dir, path, ft); err != nil {
					t.Fatal(err)
				}
				m, err := gguf.OpenModel(path, gguf.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				b, err := NewGGUF(m, Options{Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				if s := b.m.scratchSize(); s != 0 {
					t.Fatalf("whole-Linear scratch of %d values: a GGUF Linear does not decode by rows", s)
				}
				toks := randomTokens(70, o.Vocab, 5)
				got := allLogProbs(t, b, toks)
				if n := len(b.ws.w); n != 0 {
					t.Fatalf("forward allocated a %d-value whole-Linear scratch", n)
				}
				checkRowDecode(t, b, got, toks)
			})
		}
	}
}

// TestGGUFRowDecodeOrders: DequantizeRows applies every stored order as
// Dequantize does — qwen35's value-head row orders (in_proj_qkv, in_proj_z,
// in_proj_a/b) and out_proj's column order, llama's q/k interleave, and
// the stacked experts' slices (mixtral, qwen3moe, qwen35moe), and the
// gemma2/gemma3/gemma4 mappings (no stored order) — row range
// by row range bit for bit, and the forward by rows equals the forward
// decoding every Linear whole, bit for bit (checkRowDecode), with no
// whole-Linear scratch.
func TestGGUFRowDecodeOrders(t *testing.T) {
	for _, c := range []struct {
		fixture string
		opt     gguf.ConvertOptions
	}{
		{"qwen3_5", gguf.ConvertOptions{Type: gguf.F32}},
		{"qwen3_5_moe", gguf.ConvertOptions{Type: gguf.F32}},
		{"mixtral", gguf.ConvertOptions{Type: gguf.F16}},
		{"qwen3_moe", gguf.ConvertOptions{Type: gguf.F16}},
		{"gemma2", gguf.ConvertOptions{Type: gguf.F16}},
		{"gemma3_text", gguf.ConvertOptions{Type: gguf.F16}},
		{"gemma4_text", gguf.ConvertOptions{Type: gguf.F32}},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			o, err := fixtures.Defaults(c.fixture)
			if err != nil {
				t.Fatal(err)
			}
			o.Vocab, o.Init = 300, fixtures.InitRandom
			switch c.fixture {
			case "mixtral":
				o.Config = map[string]any{"sliding_window": nil}
			case "qwen3_moe":
				o.Config = map[string]any{"sliding_window": nil, "use_sliding_window": false, "mlp_only_layers": []int{}}
			case "gemma2", "gemma3_text":
				o.Config = map[string]any{"query_pre_attn_scalar": o.HeadDim} // what llama.cpp's graph scales by
			case "gemma4_text": // the fixture's own config, as gguf's gemma tests
			default:
				o.Config = nil
			}
			dir := filepath.Join(t.TempDir(), c.fixture)
			if err := fixtures.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "model.gguf")
			if err := gguf.ConvertFile(dir, path, c.opt); err != nil {
				t.Fatal(err)
			}
			m, err := gguf.OpenModel(path, gguf.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ordered := 0
			for i := 0; i < m.Spec.Layers; i++ {
				for _, ll := range m.Spec.LayerLinears(i) {
					l, err := m.Linear(ll.Module)
					if err != nil {
						t.Fatal(err)
					}
					if g := l.(*gguf.Linear); g.RowOrder() != nil || g.ColOrder() != nil {
						ordered++
					}
				}
			}
			b, err := NewGGUF(m, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			if s := b.m.scratchSize(); s != 0 {
				t.Fatalf("whole-Linear scratch of %d values: a GGUF Linear does not decode by rows", s)
			}
			toks := randomTokens(40, o.Vocab, 7)
			got := allLogProbs(t, b, toks)
			if n := len(b.ws.w); n != 0 {
				t.Fatalf("forward allocated a %d-value whole-Linear scratch", n)
			}
			t.Logf("%d Linears stored in another order", ordered)
			checkRowDecode(t, b, got, toks)
		})
	}
}
