package gguf_test

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
)

// llamaAgreement is one GGUF file scored on the same windows by qppl's
// float64 reference and by llama.cpp's own forward pass (libllama), for
// the tests that compare the two per token.
type llamaAgreement struct {
	path        string            // the GGUF file
	ws          []backends.Window // the windows
	qppl, llama []float64         // per-token NLLs, windows concatenated
	maxDiff     float64           // max |ΔNLL|
	relPPL      float64           // |PPL llama.cpp − PPL qppl| / PPL qppl
}

// llamaAgreeF32 converts the fixture at dir to an F32 GGUF file and scores
// n windows of 64 demo-text tokens with qppl and llama.cpp (llamaAgree).
func llamaAgreeF32(t *testing.T, h *llamacpp.Helper, label, dir string, n int) llamaAgreement {
	t.Helper()
	path := convert(t, dir, gguf.F32)
	return llamaAgree(t, h, label, path, demoWindows(t, dir, n, 64))
}

// llamaAgree scores the GGUF file at path on ws with qppl's reference and
// with llama.cpp and logs both PPLs and their gap under label; the bounds
// are the caller's.
func llamaAgree(t *testing.T, h *llamacpp.Helper, label, path string, ws []backends.Window) llamaAgreement {
	t.Helper()
	a := llamaAgreement{path: path, ws: ws, qppl: ggufNLL(t, path, gguf.Options{}, ws), llama: llamaNLL(t, h, path, ws)}
	a.maxDiff = maxAbsDiff(a.llama, a.qppl)
	pq, pl := ppl(a.qppl), ppl(a.llama)
	a.relPPL = math.Abs(pl-pq) / pq
	t.Logf("%s: qppl PPL %.9g, llama.cpp %.9g (rel %.2g), max |ΔNLL| %.3g", label, pq, pl, a.relPPL, a.maxDiff)
	return a
}

// llamaNLL is llama.cpp's per-token NLL of the GGUF file at path on ws,
// windows concatenated.
func llamaNLL(t *testing.T, h *llamacpp.Helper, path string, ws []backends.Window) []float64 {
	t.Helper()
	nll, err := h.NLL(path, llamaWindows(ws), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return flatten(nll)
}

// llamaQuantize quantizes the GGUF file f32 with llama_model_quantize to
// llama.cpp's file type ftype (named name) and returns the new file's
// path; the test is skipped when llama.cpp refuses the type.
func llamaQuantize(t *testing.T, h *llamacpp.Helper, f32, name string, ftype int) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), name+".gguf")
	if err := h.Quantize(f32, q, ftype); err != nil {
		if errors.Is(err, llamacpp.ErrRefused) {
			t.Skipf("llama.cpp does not produce %s here: %v", name, err)
		}
		t.Fatal(err)
	}
	return q
}

// quantizedScores is a llama_model_quantize'd file scored on the same
// windows four ways.
type quantizedScores struct {
	layers []gguf.TypeShare // the file's tensor types
	got    []float64        // qppl's reference with its own decoders
	ref    []float64        // qppl's reference on the file with every tensor dequantized by ggml's to_float
	orc    []float64        // the oracle's float64 forward of those ggml-dequantized weights (oracleNLL)
	llama  []float64        // llama.cpp's own NLL on the quantized file
}

// scoreQuantized quantizes the F32 GGUF file f32 to llama.cpp's file type
// name (llamaQuantize: skipped when llama.cpp refuses it), scores ws the
// four ways of quantizedScores and logs them.
func scoreQuantized(t *testing.T, h *llamacpp.Helper, f32, name string, ws []backends.Window) quantizedScores {
	t.Helper()
	ftype := -1
	for _, ft := range llamacpp.FileTypes() {
		if ft.Name == name {
			ftype = ft.FType
		}
	}
	if ftype < 0 {
		t.Fatalf("llama.cpp has no file type %s", name)
	}
	q := llamaQuantize(t, h, f32, name, ftype)
	m, err := gguf.OpenModel(q, gguf.Options{Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	var s quantizedScores
	s.layers, _ = m.TypeBreakdown()
	m.Close()
	deq := ggmlDequantized(t, h, q)
	s.got, s.ref, s.orc = ggufNLL(t, q, gguf.Options{}, ws), ggufNLL(t, deq, gguf.Options{}, ws), oracleNLL(t, deq, ws)
	s.llama = llamaNLL(t, h, q, ws)
	t.Logf("%-7s %s: qppl PPL %.6f (oracle on ggml-dequantized weights: max |Δ| %.2g, reference on them %.2g), llama.cpp %.6f (rel %.2g), max |ΔNLL| %.3g",
		name, shares(s.layers), ppl(s.got), maxAbsDiff(s.got, s.orc), maxAbsDiff(s.got, s.ref), ppl(s.llama), s.relPPL(), maxAbsDiff(s.got, s.llama))
	return s
}

// relPPL is |PPL llama.cpp − PPL qppl| / PPL qppl.
func (s quantizedScores) relPPL() float64 {
	return math.Abs(ppl(s.llama)-ppl(s.got)) / ppl(s.got)
}

// checkDecoders fails the test unless qppl's reference with its own
// decoders is within bound, per token, of both its NLL on the
// ggml-dequantized file and the oracle's forward of those weights.
func (s quantizedScores) checkDecoders(t *testing.T, bound float64) {
	t.Helper()
	if d := maxAbsDiff(s.got, s.ref); !(d <= bound) {
		t.Errorf("reference NLL with qppl's decoders differs from the ggml-dequantized file's by %g", d)
	}
	if d := maxAbsDiff(s.got, s.orc); !(d <= bound) {
		t.Errorf("reference NLL differs from the oracle's forward of the ggml-dequantized weights by %g", d)
	}
}
