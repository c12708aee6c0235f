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

// TestGGUFMoECommands: qppl convert --to gguf writes a quantized
// mixture-of-experts file (qwen3_moe → qwen3moe; mixtral → llama with
// experts) that qppl verify --backends reference,emu passes in fp32 and
// qppl inspect accounts expert by expert; files lying about their experts
// (a stacked expert tensor with the wrong dimensions, expert_used_count
// above expert_count) are exit 2 from qppl eval, naming the file and the
// field, before any work.
func TestGGUFMoECommands(t *testing.T) {
	for _, a := range []string{"qwen3_moe", "mixtral"} {
		t.Run(a, func(t *testing.T) {
			dir := t.TempDir()
			o, err := fixtures.Defaults(a)
			if err != nil {
				t.Fatal(err)
			}
			o.Config = map[string]any{"sliding_window": nil, "mlp_only_layers": []int{}}
			model := filepath.Join(dir, "model")
			if err := fixtures.Write(model, o); err != nil {
				t.Fatal(err)
			}
			ids := make([]int32, 70)
			for i := range ids {
				ids[i] = int32((i*i*7 + 3*i + 1) % o.Vocab)
			}
			tokens := filepath.Join(dir, "tokens.i32")
			if err := dataset.WriteTokens(tokens, ids); err != nil {
				t.Fatal(err)
			}
			q := filepath.Join(dir, "q.gguf")
			if code, stdout, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", q, "--type", "q8_0"); code != 0 {
				t.Fatalf("convert: exit %d: %s %s", code, stdout, stderr)
			}
			code, stdout, stderr := runQPPL(t, "verify", "--model", q, "--backends", "reference,emu", "--precision", "fp32", "--tokens", tokens, "--ctx", "32", "--rows", "2", "--stride", "32")
			if code != 0 || !strings.Contains(stdout, "PASS") {
				t.Errorf("verify: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if code, stdout, stderr := runQPPL(t, "inspect", "--model", q); code != 0 || !strings.Contains(stdout, "q8_0") {
				t.Errorf("inspect: exit %d\n%s\n%s", code, stdout, stderr)
			}
			arch := map[string]string{"qwen3_moe": "qwen3moe", "mixtral": "llama"}[a]
			wrongDims := filepath.Join(dir, "dims.gguf")
			if err := ggufgen.Edit(q, wrongDims, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				for i := range ts {
					if ts[i].Name == "blk.1.ffn_gate_exps.weight" {
						d := ts[i].Dims
						ts[i].Dims = []int64{d[0], d[1] * 2, d[2] / 2} // the same bytes as 4 experts of twice the width
					}
				}
				return kvs, ts
			}); err != nil {
				t.Fatal(err)
			}
			used := filepath.Join(dir, "used.gguf")
			if err := ggufgen.Edit(q, used, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				for i := range kvs {
					if kvs[i].Key == arch+".expert_used_count" {
						kvs[i].Value = gguf.Uint32Value(9)
					}
				}
				return kvs, ts
			}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ path, field string }{
				{wrongDims, `tensor "blk.1.ffn_gate_exps.weight" has ne`},
				{used, arch + ".expert_used_count"},
			} {
				code, stdout, stderr := runQPPL(t, "eval", "--model", c.path, "--tokens", tokens, "--ctx", "32")
				if code != 2 || stdout != "" || !strings.Contains(stderr, c.path) || !strings.Contains(stderr, c.field) {
					t.Errorf("%s: exit %d, stdout %q, stderr %s (want exit 2 naming the file and %q)", filepath.Base(c.path), code, stdout, stderr, c.field)
				}
			}
		})
	}
}
