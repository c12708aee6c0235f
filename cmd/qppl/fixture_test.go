package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
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
