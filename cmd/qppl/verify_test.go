package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends/cuda/emu"
	"github.com/qppl/qppl/fixtures"
)

func TestVerifyCommand(t *testing.T) {
	if _, err := emu.New(emu.Options{}); errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	o, err := fixtures.Defaults("qwen2")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--precision", "fp32"}, exitOK, "verify: PASS"},
		{[]string{"--precision", "bf16", "--gpus", "0,1", "--gpu-split", "0.01,1"}, exitOK, "verify: PASS"},
		{[]string{"--precision", "bf16", "--gpus", "0,0"}, exitUsage, `--gpus "0,0": device 0 listed twice`},
		{[]string{"--precision", "fp32", "--max-nll", "1e-12"}, exitRegressed, "verify: FAIL"},
		{[]string{"--backends", "reference,cuda"}, exitUsage, "make cuda"},
		{[]string{"--backends", "reference"}, exitUsage, "two backends"},
		{[]string{"--precision", "fp8"}, exitUsage, "precision"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		args := append([]string{"qppl", "verify", "--model", dir, "--ctx", "64", "--windows", "2"}, c.args...)
		code := run(args, nil, &stdout, &stderr)
		all := stdout.String() + stderr.String()
		if code != c.code || !strings.Contains(all, c.out) {
			t.Errorf("%v: exit %d, want %d with %q; output:\n%s", c.args, code, c.code, c.out, all)
		}
	}
}
