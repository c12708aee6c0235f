package reference

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/internal/oracle"
)

// writeCheckpoint writes src as an HF model directory (config.json and an
// F32 model.safetensors) and returns the directory.
func writeCheckpoint(t testing.TB, dir string, cfg *checkpoint.Config, src memSource) string {
	t.Helper()
	c := map[string]any{
		"model_type": cfg.ModelType, "vocab_size": cfg.VocabSize, "hidden_size": cfg.HiddenSize,
		"intermediate_size": cfg.IntermediateSize, "num_hidden_layers": cfg.NumHiddenLayers,
		"num_attention_heads": cfg.NumAttentionHeads, "num_key_value_heads": cfg.NumKeyValueHeads,
		"head_dim": cfg.HeadDim, "rms_norm_eps": cfg.RMSNormEps, "rope_theta": cfg.RopeTheta,
		"tie_word_embeddings": cfg.TieWordEmbeddings, "attention_bias": cfg.AttentionBias,
		"hidden_act": "silu", "max_position_embeddings": 4096, "torch_dtype": "float32",
	}
	if rs := cfg.RopeScaling; rs != nil {
		r := map[string]any{"rope_type": rs.Type, "factor": rs.Factor}
		if rs.Type == "llama3" {
			r["low_freq_factor"], r["high_freq_factor"] = rs.LowFreqFactor, rs.HighFreqFactor
			r["original_max_position_embeddings"] = rs.OriginalMaxPositionEmbeddings
		}
		c["rope_scaling"] = r
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(src.t))
	for n := range src.t {
		names = append(names, n)
	}
	sort.Strings(names)
	var ts []checkpoint.WriteTensor
	for _, n := range names {
		m := src.t[n]
		raw := make([]byte, 4*len(m.data))
		for i, v := range m.data {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
		}
		ts = append(ts, checkpoint.WriteTensor{Name: n, DType: "F32", Shape: m.shape, Data: raw})
	}
	if err := checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openBackend(t testing.TB, dir string) (*Backend, *checkpoint.Model) {
	t.Helper()
	m, err := arch.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, m
}

// TestNewMatchesOracle runs the production path (checkpoint + quant) on
// every test architecture written to disk and compares with the oracle
// reading the same file.
func TestNewMatchesOracle(t *testing.T) {
	for name, cfg := range testConfigs() {
		t.Run(name, func(t *testing.T) {
			dir := writeCheckpoint(t, t.TempDir(), cfg, randomWeights(cfg, 31))
			matchOracle(t, dir, randomTokens(40, cfg.VocabSize, 6), 1e-12)
		})
	}
}

// matchOracle opens dir through New, and checks every log-prob of toks
// against the oracle reading the same checkpoint to within tol.
func matchOracle(t *testing.T, dir string, toks []int32, tol float64) (*Backend, *checkpoint.Model) {
	t.Helper()
	b, m := openBackend(t, dir)
	got := allLogProbs(t, b, toks)
	want, err := oracle.LogProbs(m.Config, m.ReadFloat64, toks, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(got, want); d > tol {
		t.Errorf("max |reference - oracle| = %g at pos %d id %d", d, p, v)
	} else {
		t.Logf("max |reference - oracle| over %dx%d log-probs: %g", len(toks), m.Config.VocabSize, d)
	}
	return b, m
}

func sharedPath(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "shared"}, parts...)...)
}

func readTokens(t testing.TB, path string, n int) []int32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("token file not found: %v", err)
	}
	if len(raw) < 4*n {
		t.Fatalf("%s: %d bytes, want at least %d", path, len(raw), 4*n)
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// TestTinyWT2Mistral evaluates the small trained BF16 model of ../shared:
// the reference agrees with the oracle to 1e-11 on a 64-token window, and
// the perplexity of the first 256 tokens of the golden mistral token stream
// is finite and far below the uniform ln(32000) = 10.37 nats.
func TestTinyWT2Mistral(t *testing.T) {
	dir := sharedPath("models", "tiny-wt2-mistral")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("tiny-wt2-mistral not found: %v", err)
	}
	toks := readTokens(t, sharedPath("golden", "tokens", "mistral.test-joined.special1.i32"), 256)
	b, m := matchOracle(t, dir, toks[:64], 1e-11) // observed 2.5e-14

	sc, err := b.Score(context.Background(), backends.Window{Tokens: toks, First: 1}, backends.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range sc.NLL {
		sum += v
	}
	mean := sum / float64(len(sc.NLL))
	uniform := math.Log(float64(m.Config.VocabSize))
	t.Logf("tiny-wt2-mistral: %d tokens, mean NLL %.6f, PPL %.4f (uniform ln V = %.4f)", len(sc.NLL), mean, math.Exp(mean), uniform)
	if math.IsNaN(mean) || math.IsInf(mean, 0) || mean > uniform-3 {
		t.Errorf("mean NLL %v: not finite or not far below ln V = %v", mean, uniform)
	}
}

// TestFixturesMatchOracle runs the default fixture of every architecture
// (package fixtures: bigram-fitted embeddings, F32, qwen3 head_dim 32 ≠
// hidden/heads) through New and the oracle.
func TestFixturesMatchOracle(t *testing.T) {
	for _, a := range fixtures.Architectures() {
		t.Run(a, func(t *testing.T) {
			o, err := fixtures.Defaults(a)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := fixtures.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			matchOracle(t, dir, randomTokens(40, o.Vocab, 8), 1e-12)
		})
	}
}
