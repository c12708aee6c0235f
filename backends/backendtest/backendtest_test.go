package backendtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/reference"
)

// recorder collects failures instead of failing the test; Fatalf stops the
// suite with a sentinel panic caught by check.
type recorder struct{ msgs []string }

type fatal struct{}

func (r *recorder) Errorf(f string, a ...any) { r.msgs = append(r.msgs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.Errorf(f, a...)
	panic(fatal{})
}

func check(t *testing.T, b backends.Backend, emb []float64, dir string) (msgs []string) {
	r := &recorder{}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		msgs = r.msgs
	}()
	s := suite{t: r, b: b, c: config{tol: 1e-10, deterministic: true, ctx: 80}, emb: emb, dir: dir}
	s.run()
	return r.msgs
}

// openReference writes the qwen2 model of the given seed and opens the
// reference on it.
func openReference(t *testing.T, seed uint64) (*reference.Backend, []float64, string) {
	dir := t.TempDir()
	emb, err := WriteModel(dir, "qwen2", seed)
	if err != nil {
		t.Fatal(err)
	}
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, emb, dir
}

// broken wraps the reference and breaks one part of the contract.
type broken struct {
	*reference.Backend
	mode string
	n    int
}

func (b *broken) Info() backends.Info {
	i := b.Backend.Info()
	if b.mode == "vocab" {
		i.Vocab++
	}
	if b.mode == "precision" {
		i.Precision = "int3"
	}
	return i
}

func (b *broken) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	b.n++
	switch b.mode {
	case "panic-oov":
		for _, id := range w.Tokens {
			if id >= Vocab {
				panic("index out of range")
			}
		}
	case "accept-empty":
		if len(w.Tokens) == 0 {
			return backends.Scores{}, nil
		}
	case "ignore-cancel":
		ctx = context.Background()
	}
	sc, err := b.Backend.Score(ctx, w, req)
	switch b.mode {
	case "nll-offset":
		for i := range sc.NLL {
			sc.NLL[i] += 1e-6
		}
	case "top-reversed":
		if req.TopK > 1 {
			for i := 0; i < len(sc.Top); i += req.TopK {
				row := sc.Top[i : i+req.TopK]
				for a, z := 0, len(row)-1; a < z; a, z = a+1, z-1 {
					row[a], row[z] = row[z], row[a]
				}
			}
		}
	case "kl-zero-bug":
		for i := range sc.KL {
			sc.KL[i] = 0
		}
	case "kl-sign":
		for i := range sc.KL {
			sc.KL[i] = -sc.KL[i] - 1e-3
		}
	case "first-ignored":
		if w.First > 1 && err == nil {
			w.First = 1
			full, _ := b.Backend.Score(ctx, w, req)
			sc.NLL = full.NLL[:len(sc.NLL)]
		}
	case "sees-future":
		// Every NLL depends on the window's last token: not causal.
		for i := range sc.NLL {
			sc.NLL[i] += 1e-6 * float64(w.Tokens[len(w.Tokens)-1])
		}
	case "nondeterministic":
		if len(sc.NLL) > 0 {
			sc.NLL[0] += float64(b.n) * 1e-14 * sc.NLL[0]
		}
	}
	return sc, err
}

func TestSuitePassesReference(t *testing.T) {
	b, emb, dir := openReference(t, 4)
	if msgs := check(t, b, emb, dir); len(msgs) != 0 {
		t.Errorf("reference fails the suite:\n%s", strings.Join(msgs, "\n"))
	}
}

// TestSuiteCatchesBrokenBackends proves each check can fail.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	cases := map[string]string{
		"vocab":            "Info().Vocab",
		"panic-oov":        "panic",
		"accept-empty":     "empty window: no error",
		"ignore-cancel":    "cancelled context",
		"nll-offset":       "−LogProbs",
		"top-reversed":     "not sorted",
		"kl-sign":          "self KL",
		"kl-zero-bug":      "different distribution",
		"first-ignored":    "First=1 gives",
		"nondeterministic": "repeat",
		"sees-future":      "the whole window gives",
	}
	for mode, want := range cases {
		t.Run(mode, func(t *testing.T) {
			ref, emb, dir := openReference(t, 4)
			msgs := check(t, &broken{Backend: ref, mode: mode}, emb, dir)
			for _, m := range msgs {
				if strings.Contains(m, want) {
					return
				}
			}
			t.Errorf("no failure mentioning %q; got %q", want, msgs)
		})
	}
}

// TestSuiteCatchesWrongModel: a backend that is exact and self-consistent
// but computes another model (here: other weights of the same shapes, and
// the embedding rows the suite expects) fails only the oracle check.
func TestSuiteCatchesWrongModel(t *testing.T) {
	_, emb, dir := openReference(t, 4)
	other, _, _ := openReference(t, 5)
	msgs := check(t, other, emb, dir)
	found := false
	for _, m := range msgs {
		found = found || strings.Contains(m, "float64 oracle")
	}
	if !found {
		t.Errorf("no oracle failure for a backend of other weights; got %q", msgs)
	}
}

// TestSuiteAccuracyByPrecision: a backend reporting an unknown precision
// must be given an explicit Accuracy.
func TestSuiteAccuracyByPrecision(t *testing.T) {
	ref, emb, dir := openReference(t, 4)
	msgs := check(t, &broken{Backend: ref, mode: "precision"}, emb, dir)
	if len(msgs) != 1 || !strings.Contains(msgs[0], `Info().Precision "int3" has no default oracle accuracy`) {
		t.Errorf("got %q", msgs)
	}
}

func TestWriteModelUnknown(t *testing.T) {
	if _, err := WriteModel(t.TempDir(), "gpt2", 1); err == nil {
		t.Error("gpt2 accepted")
	}
}
