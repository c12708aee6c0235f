package gguf_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/reference"
	"github.com/qppl/qppl/tokenizer"
)

// TestDocsTable regenerates the per-type table of docs/gguf.md on
// ../shared/models/tiny-wt2-mistral (QPPL_GGUF_TABLE=1 go test ./gguf -run
// TestDocsTable -v -timeout 60m): the F32 conversion is quantized by
// llama_model_quantize to every type llama.cpp produces without an
// importance matrix; each file is scored by qppl's reference (weights
// dequantized by ggml) and by llama.cpp's own forward pass on the same
// llama-perplexity windows of WikiText-2 test; KLD is against the F32
// file's reference log-probs on the scored positions.
func TestDocsTable(t *testing.T) {
	if os.Getenv("QPPL_GGUF_TABLE") == "" {
		t.Skip("set QPPL_GGUF_TABLE=1 to regenerate docs/gguf.md's table")
	}
	h := llamaHelper(t)
	model := filepath.Join("..", "..", "shared", "models", "tiny-wt2-mistral")
	raw := filepath.Join("..", "..", "shared", "data", "wikitext-2-raw-v1", "wiki.test.raw")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("%s absent", model)
	}
	ctx, rows := 512, 16
	if s := os.Getenv("QPPL_GGUF_TABLE_ROWS"); s != "" {
		fmt.Sscan(s, &rows)
	}
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := dataset.LoadAll([]string{raw}, dataset.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := corpus.Text(dataset.JoinLlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(text, compare.MethodLlamaCpp.AddSpecialTokens())
	bos, _ := tok.BOS()
	ws, err := compare.Windows(ids, compare.WindowOptions{Method: compare.MethodLlamaCpp, Ctx: ctx, Rows: rows, BOS: bos})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	f32 := filepath.Join(work, "F32.gguf")
	if err := gguf.ConvertFile(model, f32, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	base := logProbs(t, f32, ws)
	var lines []string
	lines = append(lines, fmt.Sprintf("%d windows of %d tokens (llama-perplexity chunks, second halves scored: %d tokens)", len(ws), ctx, compare.ScoredTokens(ws)),
		"", "| type | bpw decoder | bpw head | tensor types (decoder Linears) | PPL (qppl) | KLD vs F32 | PPL (llama.cpp) | Δ PPL llama.cpp − qppl |", "|---|---|---|---|---|---|---|---|")
	types := append([]llamacpp.FileType{{Name: "F32", FType: 0}, {Name: "F16", FType: 1}}, llamacpp.FileTypes()...)
	for _, ft := range types {
		q := filepath.Join(work, ft.Name+".gguf")
		if ft.FType == 0 {
			q = f32
		} else if err := h.Quantize(f32, q, ft.FType); err != nil {
			if errors.Is(err, llamacpp.ErrRefused) {
				lines = append(lines, fmt.Sprintf("| %s | — | — | needs an importance matrix | | | | |", ft.Name))
				continue
			}
			t.Fatal(err)
		}
		m, err := gguf.OpenModel(q, gguf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := m.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := m.TypeBreakdown()
		m.Close()
		deq := q
		if ft.FType != 0 {
			deq = ggmlDequantized(t, h, q)
		}
		lp := logProbs(t, deq, ws)
		var nll, kl float64
		n := 0
		for i, w := range ws {
			for p := w.First; p < len(w.Tokens); p++ {
				row := lp[i][p-1]
				nll -= row[w.Tokens[p]]
				brow := base[i][p-1]
				for v, b := range brow {
					if pb := math.Exp(b); pb > 0 {
						kl += pb * (b - row[v])
					}
				}
				n++
			}
		}
		lc, err := h.NLL(q, llamaWindows(ws), work)
		if err != nil {
			t.Fatal(err)
		}
		pq, pl := math.Exp(nll/float64(n)), ppl(flatten(lc))
		var sh []string
		for _, s := range layers {
			sh = append(sh, fmt.Sprintf("%s×%d", s.Type, s.Tensors))
		}
		lines = append(lines, fmt.Sprintf("| %s | %.4f | %.4f | %s | %.4f | %.5f | %.4f | %+.4f |", ft.Name, rep.BPWLayer, rep.BPWHead, strings.Join(sh, " "), pq, kl/float64(n), pl, pl-pq))
		t.Log(lines[len(lines)-1])
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}

// logProbs returns the reference log-probs of every position of every
// window of a GGUF model.
func logProbs(t *testing.T, path string, ws []backends.Window) [][][]float64 {
	t.Helper()
	m, err := gguf.OpenModel(path, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, err := reference.NewGGUF(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out := make([][][]float64, len(ws))
	for i, w := range ws {
		out[i] = make([][]float64, len(w.Tokens))
		err := b.LogProbs(context.Background(), w, w.First-1, func(pos int, lp []float64) error {
			out[i][pos] = append([]float64(nil), lp...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
