package reference

import (
	"math"
	"testing"

	"github.com/qppl/qppl/internal/oracle"
)

// TestSlidingWindow: per-layer sliding windows (issue 14). At a context of
// 70 tokens, longer than every window, the reference equals the
// independent oracle to 1e-9 on every log-prob (mistral: every layer
// slides; qwen2: only layer 1, as max_window_layers = 1 makes it; window 1:
// each token sees itself only). A window of at least the context (70, 1000)
// gives bit-identical log-probs to full attention, and a shorter window
// does change them (so the comparison can fail).
func TestSlidingWindow(t *testing.T) {
	const T = 70
	cases := []struct {
		name    string
		family  string
		window  int
		sliding []bool // nil: every layer
		full    bool   // expected bit-identical to no window
	}{
		{"mistral-w16", "mistral", 16, nil, false},
		{"mistral-w1", "mistral", 1, nil, false},
		{"mistral-w69", "mistral", 69, nil, false},
		{"qwen2-layer1-w8", "qwen2", 8, []bool{false, true}, false},
		{"qwen2-layer0-w30", "qwen2", 30, []bool{true, false}, false},
		{"mistral-w70", "mistral", 70, nil, true},
		{"mistral-w1000", "mistral", 1000, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := *testConfigs()[map[string]string{"mistral": "mistral-mqa-untied", "qwen2": "qwen2-bias"}[c.family]]
			src := randomWeights(&base, 21)
			toks := randomTokens(T, base.VocabSize, 4)
			fb, err := newBackend(&base, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			full := allLogProbs(t, fb, toks)

			cfg := base
			cfg.SlidingWindow, cfg.SlidingLayers = c.window, c.sliding
			b, err := newBackend(&cfg, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < cfg.NumHiddenLayers; i++ {
				want := c.window
				if c.sliding != nil && !c.sliding[i] {
					want = 0
				}
				if got := b.m.spec.Window(i); got != want {
					t.Fatalf("layer %d window %d, want %d", i, got, want)
				}
			}
			got := allLogProbs(t, b, toks)
			want, err := oracle.LogProbs(&cfg, src.getter, toks, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, want); d > 1e-9 {
				t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			identical := true
			for p := range got {
				for v := range got[p] {
					if math.Float64bits(got[p][v]) != math.Float64bits(full[p][v]) {
						identical = false
					}
				}
			}
			if identical != c.full {
				d, _, _ := maxAbsDiff(got, full)
				t.Errorf("bit-identical to full attention: %v, want %v (max diff %g)", identical, c.full, d)
			}
			// Positions inside the first window see all their keys: equal
			// to full attention there (layer by layer, every earlier row is
			// also inside its window).
			if c.sliding == nil && !c.full {
				for p := 0; p < c.window; p++ {
					for v := range got[p] {
						if got[p][v] != full[p][v] {
							t.Fatalf("pos %d < window %d differs from full attention", p, c.window)
						}
					}
				}
			}
		})
	}
}
