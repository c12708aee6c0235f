package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare/suite"
)

// TestDemo runs the demo on a few short windows and checks what it promises:
// every format evaluated on the same tokens, KL against the base, bpw in
// the right order, a plot.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("demo quantizes sixteen models")
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"qppl", "demo", "--out", dir, "--ctx", "64", "--stride", "64", "--rows", "3"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exit %d\nstderr:\n%s", code, stderr.String())
	}
	rs, err := suite.LoadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rs.Results), 1+len(demoSchemes); got != want {
		t.Fatalf("%d results, want %d", got, want)
	}
	base := rs.Results[0]
	if base.Label != "BF16 base" || base.KLD != nil || base.BPWLayer != 16 {
		t.Fatalf("base result = label %q, kld %v, bpw %v", base.Label, base.KLD, base.BPWLayer)
	}
	for i, r := range rs.Results[1:] {
		if r.Label != demoSchemes[i].label {
			t.Errorf("result %d label %q, want %q", i+1, r.Label, demoSchemes[i].label)
		}
		if r.TokensHash != base.TokensHash || r.TokensScored != base.TokensScored || r.Windows != 3 {
			t.Errorf("%s: not evaluated on the base's tokens/windows", r.Label)
		}
		if r.KLD == nil || !(r.KLD.Mean > 0) {
			t.Errorf("%s: KLD %+v, want a positive mean against the base", r.Label, r.KLD)
		}
		// 8-bit formats store about 8 bits per weight plus scales; 4-bit ones about 4-5.
		lo, hi := 4.0, 5.0
		if strings.HasPrefix(r.Label, "INT8") || strings.HasPrefix(r.Label, "FP8") || strings.HasPrefix(r.Label, "GGUF Q8") {
			lo, hi = 8.0, 8.5
		}
		// The llama.cpp super-block types are really used (their
		// 32-value fallbacks would give Q4_K_M 5.9 and IQ4_XS 4.5 bpw).
		switch r.Label {
		case "GGUF Q4_K_M":
			lo, hi = 4.5, 5.0
		case "GGUF IQ4_XS":
			lo, hi = 4.25, 4.45
		}
		if r.BPWLayer < lo || r.BPWLayer > hi {
			t.Errorf("%s: bpw %.3f outside [%g, %g]", r.Label, r.BPWLayer, lo, hi)
		}
	}
	f, err := os.Open(filepath.Join(dir, "kld.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("kld.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
		t.Fatalf("kld.png is %v", b)
	}
	if !bytes.Contains(stdout.Bytes(), []byte("INT4 W4A16 g128")) {
		t.Fatalf("stdout has no result table:\n%s", stdout.String())
	}
}
