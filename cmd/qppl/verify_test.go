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

// TestVerifyMixtralRoutingFlip: the mixtral fixture at bf16 on the demo
// text has one token whose expert choice flips between the reference and
// the emulated kernels (a router margin of 6.6e-4 in layer 1, far below
// bf16's router-logit noise): verify sets it apart and passes, printing
// the flip; with --router-margin 0 the same token fails the run.
func TestVerifyMixtralRoutingFlip(t *testing.T) {
	if _, err := emu.New(emu.Options{}); errors.Is(err, emu.ErrNoCgo) {
		t.Skip(err)
	}
	o, err := fixtures.Defaults("mixtral")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		extra []string
		code  int
		out   []string
	}{
		{nil, exitOK, []string{"verify: PASS", "1 scored tokens set apart", "window 1 position 75 layer 1: experts [4 5] vs [4 6], margin 0.00066"}},
		{[]string{"--router-margin", "0"}, exitRegressed, []string{"verify: FAIL", "routing flip at window 1 position 75 layer 1", "max |ΔNLL| 0.871"}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"qppl", "verify", "--model", dir, "--ctx", "256", "--rows", "2", "--precision", "bf16", "--text", "../../fixtures/demo.txt", "--probe-windows", "0"}, c.extra...)
		code := run(args, nil, &stdout, &stderr)
		all := stdout.String() + stderr.String()
		for _, want := range c.out {
			if code != c.code || !strings.Contains(all, want) {
				t.Errorf("%v: exit %d, want %d with %q; output:\n%s", c.extra, code, c.code, want, all)
				break
			}
		}
	}
}
