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

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/internal/llamacpp"
	"github.com/qppl/qppl/quant"
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
	ctx, nwin := 512, 16
	if s := os.Getenv("QPPL_GGUF_TABLE_ROWS"); s != "" {
		fmt.Sscan(s, &nwin)
	}
	if s := os.Getenv("QPPL_GGUF_TABLE_CTX"); s != "" {
		fmt.Sscan(s, &ctx)
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
	ws, err := compare.Windows(ids, compare.WindowOptions{Method: compare.MethodLlamaCpp, Ctx: ctx, Rows: nwin, BOS: bos})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	f32 := filepath.Join(work, "F32.gguf")
	if err := gguf.ConvertFile(model, f32, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, types string
		rep         *quant.Report
		deq, file   string
		b           *reference.Backend
		nll, kl     float64
	}
	var rows []*row
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
				rows = append(rows, &row{name: ft.Name})
				continue
			}
			t.Fatal(err)
		}
		m, err := gguf.OpenModel(q, gguf.Options{Inspect: true})
		if err != nil {
			t.Fatal(err)
		}
		r := &row{name: ft.Name, file: q, deq: q}
		if r.rep, err = m.Inspect(); err != nil {
			t.Fatal(err)
		}
		layers, _ := m.TypeBreakdown()
		m.Close()
		var sh []string
		for _, s := range layers {
			sh = append(sh, fmt.Sprintf("%s×%d", s.Type, s.Tensors))
		}
		r.types = strings.Join(sh, " ")
		if ft.FType != 0 {
			r.deq = ggmlDequantized(t, h, q)
		}
		dm, err := gguf.OpenModel(r.deq, gguf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer dm.Close()
		if r.b, err = reference.NewGGUF(dm, reference.Options{}); err != nil {
			t.Fatal(err)
		}
		defer r.b.Close()
		rows = append(rows, r)
	}
	// Window by window: the F32 row (first) is the KL base.
	base := rows[0]
	n := 0
	for _, w := range ws {
		blp := map[int][]float64{}
		err := base.b.LogProbs(context.Background(), w, w.First-1, func(pos int, lp []float64) error {
			blp[pos] = append([]float64(nil), lp...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.b == nil {
				continue
			}
			err := r.b.LogProbs(context.Background(), w, w.First-1, func(pos int, lp []float64) error {
				if pos+1 >= len(w.Tokens) {
					return nil
				}
				r.nll -= lp[w.Tokens[pos+1]]
				for v, b := range blp[pos] {
					if pb := math.Exp(b); pb > 0 {
						r.kl += pb * (b - lp[v])
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		n += len(w.Tokens) - w.First
		t.Logf("window %d done", w.Index)
	}
	for _, r := range rows {
		if r.b == nil {
			lines = append(lines, fmt.Sprintf("| %s | — | — | llama.cpp needs an importance matrix | | | | |", r.name))
			continue
		}
		lc, err := h.NLL(r.file, llamaWindows(ws), work)
		if err != nil {
			t.Fatal(err)
		}
		pq, pl := math.Exp(r.nll/float64(n)), ppl(flatten(lc))
		lines = append(lines, fmt.Sprintf("| %s | %.4f | %.4f | %s | %.4f | %.5f | %.4f | %+.4f |", r.name, r.rep.BPWLayer, r.rep.BPWHead, r.types, pq, r.kl/float64(n), pl, pl-pq))
		t.Log(lines[len(lines)-1])
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}
