package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/ggufgen"
)

// TestGemma4MoEGGUFCommands: `qppl fixture --arch gemma4_text --variant
// moe` + `qppl convert --to gguf` + `qppl eval` give the safetensors PPL
// line, `qppl verify --backends reference,emu` passes in fp32 on the file,
// and a file without a layer's router scale (ffn_gate_inp.scale) or
// per-expert scale (ffn_down_exps.scale) is refused by eval, exit 2
// naming the file and the tensor.
func TestGemma4MoEGGUFCommands(t *testing.T) {
	ids := make([]int32, 130)
	for i := range ids {
		ids[i] = int32((i*i*7 + 3*i + 1) % 512)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	model, g := filepath.Join(dir, "moe"), filepath.Join(dir, "moe.gguf")
	if code, _, stderr := runQPPL(t, "fixture", "--arch", "gemma4_text", "--variant", "moe", "--out", model); code != 0 {
		t.Fatalf("fixture: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", g); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	_, st, _ := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "48", "--stride", "24")
	code, gg, stderr := runQPPL(t, "eval", "--model", g, "--tokens", tokens, "--ctx", "48", "--stride", "24")
	if code != 0 || pplLine(gg) == "" || pplLine(gg) != pplLine(st) {
		t.Fatalf("eval GGUF: exit %d %q vs safetensors %q: %s", code, pplLine(gg), pplLine(st), stderr)
	}
	code, stdout, stderr := runQPPL(t, "verify", "--model", g, "--backends", "reference,emu", "--precision", "fp32", "--tokens", tokens, "--ctx", "48", "--rows", "2", "--stride", "48")
	if code != 0 || !strings.Contains(stdout, "PASS") {
		t.Errorf("verify: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, name := range []string{"blk.1.ffn_gate_inp.scale", "blk.2.ffn_down_exps.scale"} {
		bad := filepath.Join(dir, name+".gguf")
		if err := ggufgen.Edit(g, bad, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			var out []gguf.WriteTensor
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return kvs, out
		}); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runQPPL(t, "eval", "--model", bad, "--tokens", tokens, "--ctx", "48")
		if code != 2 || stdout != "" || !strings.Contains(stderr, bad) || !strings.Contains(stderr, name) {
			t.Errorf("eval without %s: exit %d, stdout %q, stderr %s", name, code, stdout, stderr)
		}
	}
	// the experts' gate and up fused into ffn_gate_up_exps (as llama.cpp's
	// gemma4 loader also reads them): the same PPL line; a fused tensor
	// with the wrong ne exits 2 naming it.
	fused := filepath.Join(dir, "fused.gguf")
	if err := ggufgen.Edit(g, fused, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return kvs, ggufgen.FuseGateUpExps(ts, false)
	}); err != nil {
		t.Fatal(err)
	}
	if code, fz, stderr := runQPPL(t, "eval", "--model", fused, "--tokens", tokens, "--ctx", "48", "--stride", "24"); code != 0 || pplLine(fz) != pplLine(st) {
		t.Errorf("eval fused GGUF: exit %d %q vs safetensors %q: %s", code, pplLine(fz), pplLine(st), stderr)
	}
	const name = "blk.2.ffn_gate_up_exps.weight"
	bad := filepath.Join(dir, "fused-bad.gguf")
	if err := ggufgen.Edit(fused, bad, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if ts[i].Name == name {
				ts[i].Dims = []int64{ts[i].Dims[0], ts[i].Dims[1] / 2, 2 * ts[i].Dims[2]}
			}
		}
		return kvs, ts
	}); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runQPPL(t, "eval", "--model", bad, "--tokens", tokens, "--ctx", "48"); code != 2 || stdout != "" || !strings.Contains(stderr, bad) || !strings.Contains(stderr, name) {
		t.Errorf("eval with %s of the wrong ne: exit %d, stdout %q, stderr %s", name, code, stdout, stderr)
	}
}
