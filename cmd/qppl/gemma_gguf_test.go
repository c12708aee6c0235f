package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/ggufgen"
)

// TestGemmaGGUFCommands: for gemma2, gemma3_text and gemma4_text, `qppl
// fixture` + `qppl convert --to gguf` + `qppl eval` give the safetensors
// PPL line; `qppl verify --backends reference,emu` passes on the gemma2 and
// gemma3 files (gemma4 is not on emu yet); `qppl fixture --arch gemma2`'s
// own query_pre_attn_scalar (20 ≠ head_dim 24) is refused by convert, and
// a gemma2 file without its attention soft cap by eval, exit 2 naming the
// file and the field.
func TestGemmaGGUFCommands(t *testing.T) {
	ids := make([]int32, 130)
	for i := range ids {
		ids[i] = int32((i*i*7 + 3*i + 1) % 512)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"gemma2", "gemma3_text", "gemma4_text"} {
		t.Run(a, func(t *testing.T) {
			o, err := fixtures.Defaults(a)
			if err != nil {
				t.Fatal(err)
			}
			o.Init = fixtures.InitRandom
			if a != "gemma4_text" {
				o.Config = map[string]any{"query_pre_attn_scalar": o.HeadDim}
			}
			model := filepath.Join(t.TempDir(), a)
			if err := fixtures.Write(model, o); err != nil {
				t.Fatal(err)
			}
			g := filepath.Join(t.TempDir(), a+".gguf")
			if code, _, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", g); code != 0 {
				t.Fatalf("convert: exit %d: %s", code, stderr)
			}
			_, st, _ := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "48", "--stride", "24")
			code, gg, stderr := runQPPL(t, "eval", "--model", g, "--tokens", tokens, "--ctx", "48", "--stride", "24")
			if code != 0 || pplLine(gg) == "" || pplLine(gg) != pplLine(st) {
				t.Fatalf("eval GGUF: exit %d %q vs safetensors %q: %s", code, pplLine(gg), pplLine(st), stderr)
			}
			if a == "gemma4_text" {
				return
			}
			code, stdout, stderr := runQPPL(t, "verify", "--model", g, "--backends", "reference,emu", "--precision", "fp32", "--tokens", tokens, "--ctx", "48", "--rows", "2", "--stride", "48")
			if code != 0 || !strings.Contains(stdout, "PASS") {
				t.Errorf("verify: exit %d\n%s\n%s", code, stdout, stderr)
			}
		})
	}

	// qppl fixture --arch gemma2: query_pre_attn_scalar 20, which llama.cpp
	// cannot express.
	fx := filepath.Join(dir, "fx")
	if code, _, stderr := runQPPL(t, "fixture", "--arch", "gemma2", "--out", fx); code != 0 {
		t.Fatalf("fixture: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runQPPL(t, "convert", "--model", fx, "--to", "gguf", "--out", filepath.Join(dir, "fx.gguf"))
	if code != 2 || stdout != "" || !strings.Contains(stderr, "query_pre_attn_scalar") || !strings.Contains(stderr, fx) {
		t.Errorf("convert of the default gemma2 fixture: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	// A gemma2 file without gemma2.attn_logit_softcapping.
	o, _ := fixtures.Defaults("gemma2")
	o.Config = map[string]any{"query_pre_attn_scalar": o.HeadDim}
	m2 := filepath.Join(dir, "g2")
	if err := fixtures.Write(m2, o); err != nil {
		t.Fatal(err)
	}
	g2, bad := filepath.Join(dir, "g2.gguf"), filepath.Join(dir, "nocap.gguf")
	if err := gguf.ConvertFile(m2, g2, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	if err := ggufgen.Edit(g2, bad, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		var out []gguf.KV
		for _, kv := range kvs {
			if kv.Key != "gemma2.attn_logit_softcapping" {
				out = append(out, kv)
			}
		}
		return out, ts
	}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runQPPL(t, "eval", "--model", bad, "--tokens", tokens, "--ctx", "48")
	if code != 2 || stdout != "" || !strings.Contains(stderr, bad) || !strings.Contains(stderr, "gemma2.attn_logit_softcapping") {
		t.Errorf("eval without the soft cap: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
}
