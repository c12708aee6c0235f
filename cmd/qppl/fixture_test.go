package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
)

func TestFixtureCmd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	code := run([]string{"qppl", "fixture", "--arch", "qwen2", "--seed", "7", "--out", dir, "--layers", "1", "--vocab", "300", "--dtype", "bf16", "--tied"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	if c.ModelType != "qwen2" || c.NumHiddenLayers != 1 || c.VocabSize != 300 || !c.TieWordEmbeddings || c.TorchDtype != "bfloat16" {
		t.Errorf("config %+v", c)
	}
	if !strings.Contains(out.String(), "wrote qwen2 fixture") {
		t.Errorf("stdout %q", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "gpt2"}, `unknown architecture "gpt2"`},
		{[]string{"--dtype", "f16"}, `--dtype "f16" must be f32 or bf16`},
		{[]string{"--heads", "3"}, "not divisible"},
		{[]string{"--preset", "huge"}, `unknown --preset "huge"`},
		{[]string{"--preset", "smollm2", "--arch", "qwen3"}, "drop --arch"},
		{[]string{"--tied", "--init", "bigram", "--intermediate", "32"}, "bigram init of a tied model needs"},
		{[]string{"--init", "ones"}, `init "ones" must be random or bigram`},
		{[]string{"--arch", "gemma4_text", "--variant", "dense"}, `gemma4_text has no fixture variant "dense" (variants: moe)`},
		{[]string{"--arch", "qwen3_moe", "--experts", "stacked"}, `experts layout "stacked" must be fused or per-expert`},
		{[]string{"--config", "[1]"}, `--config "[1]" is not a JSON object`},
	} {
		bad := filepath.Join(t.TempDir(), "bad")
		errb.Reset()
		code := run(append([]string{"qppl", "fixture", "--out", bad}, c.args...), nil, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", c.args, code, errb.String(), c.want)
		}
		if _, err := os.Stat(bad); err == nil {
			t.Errorf("%v: output written", c.args)
		}
	}
}

// TestFixtureMoEVariant: --variant moe writes the Gemma 4 MoE fixture with
// its experts fused (the release layout), --experts per-expert the other
// layout, and --config overrides config.json keys.
func TestFixtureMoEVariant(t *testing.T) {
	for _, c := range []struct {
		args []string
		has  string
	}{
		{nil, "model.layers.0.experts.gate_up_proj"},
		{[]string{"--experts", "per-expert"}, "model.layers.0.experts.5.up_proj.weight"},
	} {
		dir := filepath.Join(t.TempDir(), "m")
		var out, errb strings.Builder
		args := append([]string{"qppl", "fixture", "--arch", "gemma4_text", "--variant", "moe", "--vocab", "300", "--out", dir,
			"--config", `{"num_experts": 6, "top_k_experts": 3}`}, c.args...)
		if code := run(args, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if !strings.Contains(out.String(), "gemma4_text (moe) fixture") {
			t.Errorf("stdout %q", out.String())
		}
		m, err := checkpoint.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Has(c.has) || m.Has("model.layers.0.experts.6.up_proj.weight") {
			t.Errorf("%v: tensor %s missing, or a 7th expert", c.args, c.has)
		}
		if e := m.Config.Raw["num_experts"]; string(e) != "6" {
			t.Errorf("num_experts %s", e)
		}
		m.Close()
	}
}
