package gguf_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
)

// gptOssFixture writes `qppl fixture --arch gpt_oss --init random`.
func gptOssFixture(t *testing.T, edit func(*fixtures.Options)) string {
	t.Helper()
	o, err := fixtures.Defaults("gpt_oss")
	if err != nil {
		t.Fatal(err)
	}
	o.Init = fixtures.InitRandom
	if edit != nil {
		edit(&o)
	}
	dir := filepath.Join(t.TempDir(), "gpt_oss")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGptOssF32EqualsSafetensors: the F32 GGUF conversion of the gpt_oss
// fixture (sinks, biased router, experts split into ffn_gate_exps /
// ffn_up_exps from gate_up_proj's interleaved columns, YaRN, alternating
// sliding window 16 shorter than the windows) gives the safetensors
// model's per-token NLL in the reference to 1e-12 (the conversion moves
// float32 values without arithmetic: exact).
func TestGptOssF32EqualsSafetensors(t *testing.T) {
	dir := gptOssFixture(t, nil)
	ws := testWindows(512)
	want := safetensorsNLL(t, dir, ws)
	path := convert(t, dir, gguf.F32)
	f := openRaw(t, path)
	if v, _ := f.Get("general.architecture"); mustStr(v) != "gpt-oss" {
		t.Fatalf("general.architecture %v", v)
	}
	for _, n := range []string{"blk.0.attn_sinks.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.bias", "blk.1.post_attention_norm.weight", "blk.0.ffn_gate_inp.bias"} {
		if _, ok := f.Tensor(n); !ok {
			t.Fatalf("tensor %s missing", n)
		}
	}
	got := ggufNLL(t, path, gguf.Options{}, ws)
	d := maxAbsDiff(got, want)
	t.Logf("PPL safetensors %.15g, GGUF %.15g, max |ΔNLL| %.3g", ppl(want), ppl(got), d)
	if !(d <= 1e-12) || !(math.Abs(ppl(got)-ppl(want)) <= 1e-9*ppl(want)) {
		t.Fatalf("GGUF NLL differs from safetensors by up to %g", d)
	}
}
