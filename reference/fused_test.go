package reference

import (
	"strings"
	"testing"

	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// TestFusedSplitIdentical: a phi3 model (fused qkv_proj, gate_up_proj)
// gives the same log-probs, bit for bit, as the mistral model holding the
// same weights split into q/k/v_proj and gate/up_proj (every output
// element is the same dot product); both equal the oracle, which splits
// the fused weights itself.
func TestFusedSplitIdentical(t *testing.T) {
	split := testConfigs()["mistral-mqa-untied"]
	src := randomWeights(split, 21)
	fcfg := *split
	fcfg.ModelType = "phi3"
	fused := memSource{t: map[string]memTensor{}, aq: map[string]quant.ActQuantizer{}}
	cat := func(names ...string) memTensor {
		var out memTensor
		for _, n := range names {
			t := src.t[n]
			out.data = append(out.data, t.data...)
			if out.shape == nil {
				out.shape = []int{0, t.shape[1]}
			}
			out.shape[0] += t.shape[0]
		}
		return out
	}
	for name, tns := range src.t {
		switch {
		case strings.HasSuffix(name, "self_attn.q_proj.weight"):
			p := strings.TrimSuffix(name, "q_proj.weight")
			fused.t[p+"qkv_proj.weight"] = cat(p+"q_proj.weight", p+"k_proj.weight", p+"v_proj.weight")
		case strings.HasSuffix(name, "mlp.gate_proj.weight"):
			p := strings.TrimSuffix(name, "gate_proj.weight")
			fused.t[p+"gate_up_proj.weight"] = cat(p+"gate_proj.weight", p+"up_proj.weight")
		case strings.Contains(name, "k_proj.weight"), strings.Contains(name, "v_proj.weight"), strings.Contains(name, "up_proj.weight"):
		default:
			fused.t[name] = tns
		}
	}
	toks := randomTokens(70, split.VocabSize, 4)
	sb, err := newBackend(split, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := newBackend(&fcfg, fused, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, got := allLogProbs(t, sb, toks), allLogProbs(t, fb, toks)
	if d, p, v := maxAbsDiff(got, want); d != 0 {
		t.Errorf("fused vs split: max |Δ| = %g at pos %d id %d, want bit-identical", d, p, v)
	}
	ref, err := oracle.LogProbs(&fcfg, fused.getter, toks, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, p, v := maxAbsDiff(got, ref); d > 1e-12 {
		t.Errorf("fused vs oracle: max |Δ| = %g at pos %d id %d", d, p, v)
	}
	// Not vacuous: swapping the halves of gate_up_proj (up first) changes
	// the model.
	for name, tns := range fused.t {
		if strings.HasSuffix(name, "gate_up_proj.weight") {
			n := len(tns.data) / 2
			sw := append(append([]float64(nil), tns.data[n:]...), tns.data[:n]...)
			fused.t[name] = memTensor{sw, tns.shape}
		}
	}
	xb, err := newBackend(&fcfg, fused, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := maxAbsDiff(allLogProbs(t, xb, toks), want); d < 1e-6 {
		t.Errorf("gate and up swapped: log-probs within %g of the split model", d)
	}
}
