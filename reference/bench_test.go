package reference

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qppl/qppl/backends"
	"github.com/qppl/qppl/checkpoint"
)

// smolShape is SmolLM2-135M's shape (tokenizers/smollm2/model-config.json).
var smolShape = map[string]any{
	"model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
	"intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
	"num_key_value_heads": 3, "head_dim": 64, "rms_norm_eps": 1e-5,
	"rope_theta": 100000.0, "tie_word_embeddings": true, "hidden_act": "silu",
	"max_position_embeddings": 8192, "torch_dtype": "bfloat16",
}

// writeRandomBF16Model writes a random BF16 model of config c into dir.
// Values are uniform in ±sqrt(3)·scale (scale 1 for the embedding and
// norms' offsets, 1/sqrt(fan_in) for Linears) from a fixed seed.
func writeRandomBF16Model(dir string, c map[string]any) error {
	js, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		return err
	}
	geti := func(k string) int { return int(c[k].(int)) }
	V, C, I, L := geti("vocab_size"), geti("hidden_size"), geti("intermediate_size"), geti("num_hidden_layers")
	q, kv := geti("num_attention_heads")*geti("head_dim"), geti("num_key_value_heads")*geti("head_dim")
	r := rand.New(rand.NewPCG(2024, 135))
	var ts []checkpoint.WriteTensor
	add := func(name string, shape []int, mean, scale float64) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		raw := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			v := float32(mean + scale*math.Sqrt(3)*(2*r.Float64()-1))
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(math.Float32bits(v)>>16))
		}
		ts = append(ts, checkpoint.WriteTensor{Name: name, DType: "BF16", Shape: shape, Data: raw})
	}
	add("model.embed_tokens.weight", []int{V, C}, 0, 1)
	add("model.norm.weight", []int{C}, 1, 0.05)
	for l := 0; l < L; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", []int{C}, 1, 0.05)
		add(p+"post_attention_layernorm.weight", []int{C}, 1, 0.05)
		add(p+"self_attn.q_proj.weight", []int{q, C}, 0, 1/math.Sqrt(float64(C)))
		add(p+"self_attn.k_proj.weight", []int{kv, C}, 0, 1/math.Sqrt(float64(C)))
		add(p+"self_attn.v_proj.weight", []int{kv, C}, 0, 1/math.Sqrt(float64(C)))
		add(p+"self_attn.o_proj.weight", []int{C, q}, 0, 1/math.Sqrt(float64(q)))
		add(p+"mlp.gate_proj.weight", []int{I, C}, 0, 1/math.Sqrt(float64(C)))
		add(p+"mlp.up_proj.weight", []int{I, C}, 0, 1/math.Sqrt(float64(C)))
		add(p+"mlp.down_proj.weight", []int{C, I}, 0, 1/math.Sqrt(float64(I)))
	}
	return checkpoint.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil)
}

const benchModelEnv = "QPPL_WRITE_BENCH_MODEL"

// TestWriteBenchModel is a helper, not a test: the benchmark runs the test
// binary with QPPL_WRITE_BENCH_MODEL=DIR so that the model is generated in a
// separate process and its memory does not count in the benchmark's peak RSS.
func TestWriteBenchModel(t *testing.T) {
	dir := os.Getenv(benchModelEnv)
	if dir == "" {
		t.Skip("helper for BenchmarkForward_SmolLM2Shaped_T512")
	}
	if err := writeRandomBF16Model(dir, smolShape); err != nil {
		t.Fatal(err)
	}
}

// peakRSSMB returns VmHWM from /proc/self/status in MB (0 if unavailable).
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// BenchmarkForward_SmolLM2Shaped_T512 times one 512-token window (all 511
// targets scored) through a random BF16 model of SmolLM2-135M's shape. The
// model is generated once by a child process into a temp dir (or taken from
// $QPPL_BENCH_MODEL_DIR when set). Reports tokens/s and the process's peak
// RSS (VmHWM) in MB.
func BenchmarkForward_SmolLM2Shaped_T512(b *testing.B) {
	dir := os.Getenv("QPPL_BENCH_MODEL_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteBenchModel$", "-test.count=1")
		cmd.Env = append(os.Environ(), benchModelEnv+"="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("generating the model: %v\n%s", err, out)
		}
	}
	m, err := checkpoint.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	t0 := time.Now()
	be, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	load := time.Since(t0)
	toks := make([]int32, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range toks {
		toks[i] = int32(r.IntN(49152))
	}
	w := backends.Window{Tokens: toks, First: 1}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sc, err := be.Score(context.Background(), w, backends.Request{})
		if err != nil {
			b.Fatal(err)
		}
		if len(sc.NLL) != 511 || math.IsNaN(sc.NLL[0]) {
			b.Fatalf("bad scores: %d NLLs", len(sc.NLL))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(toks)*b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(peakRSSMB(), "peakRSS_MB")
	b.ReportMetric(load.Seconds(), "load_s")
}
