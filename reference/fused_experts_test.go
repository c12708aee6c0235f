package reference

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/arch"
	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/internal/oracle"
	"github.com/qppl/qppl/quant"
)

// moeFixtures are the fixtures of every family with a mixture of experts
// whose transformers ≥ 5 model holds the experts fused (arch.Spec.FusedExperts).
var moeFixtures = []struct{ arch, variant string }{{"qwen3_moe", ""}, {"qwen3_5_moe", ""}, {"gemma4_text", "moe"}}

func writeMoEFixture(t *testing.T, a, variant, experts string) string {
	t.Helper()
	o, err := fixtures.Defaults(a)
	if err != nil {
		t.Fatal(err)
	}
	o.Vocab, o.Init, o.Variant, o.Experts, o.DType = 300, fixtures.InitRandom, variant, experts, checkpoint.BF16
	dir := filepath.Join(t.TempDir(), experts)
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFusedExperts: for every MoE family, the fused 3-D layout
// (experts.gate_up_proj, experts.down_proj) and the per-expert layout of
// the same BF16 weights give bit-identical log-probs, both equal to the
// oracle (which slices the fused tensors on its own); bpw counts the same
// per-expert modules at 16 bits in both layouts; a checkpoint holding both
// layouts stops naming the fused tensors as unused; gate and up swapped in
// gate_up_proj change the model (so the bit-identity is not vacuous).
func TestFusedExperts(t *testing.T) {
	toks := randomTokens(40, 300, 4)
	for _, f := range moeFixtures {
		t.Run(f.arch+f.variant, func(t *testing.T) {
			fused := writeMoEFixture(t, f.arch, f.variant, fixtures.ExpertsFused)
			per := writeMoEFixture(t, f.arch, f.variant, fixtures.ExpertsPerExpert)
			bf, mf := openBackend(t, fused)
			bp, mp := openBackend(t, per)
			spec, err := arch.For(mf.Config)
			if err != nil {
				t.Fatal(err)
			}
			layer := -1
			for i := 0; i < spec.Layers && layer < 0; i++ {
				if spec.Sparse(i) {
					layer = i
				}
			}
			gu, dn := spec.FusedExperts(layer)
			g0, _, _ := spec.Expert(layer, 0)
			if !mf.Has(gu) || !mf.Has(dn) || mf.Has(g0+".weight") || mp.Has(gu) || !mp.Has(g0+".weight") {
				t.Fatalf("layouts not as written: fused has %s %v, per-expert has %s %v", gu, mf.Has(gu), g0, mp.Has(g0+".weight"))
			}
			got, want := allLogProbs(t, bf, toks), allLogProbs(t, bp, toks)
			for i := range got {
				for j := range got[i] {
					if math.Float64bits(got[i][j]) != math.Float64bits(want[i][j]) {
						t.Fatalf("log-prob [%d][%d]: fused %v, per-expert %v", i, j, got[i][j], want[i][j])
					}
				}
			}
			ref, err := oracle.LogProbs(mf.Config, mf.ReadFloat64, toks, oracle.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d, p, v := maxAbsDiff(got, ref); d > 1e-9 {
				t.Errorf("fused: max |reference - oracle| = %g at pos %d id %d", d, p, v)
			}
			rf, err := quant.Inspect(mf)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := quant.Inspect(mp)
			if err != nil {
				t.Fatal(err)
			}
			if len(rf.Modules) != len(rp.Modules) || rf.LayerBytes != rp.LayerBytes || rf.BPWLayer != 16 {
				t.Errorf("bpw: fused %d modules, %d bytes, %v bpw; per-expert %d modules, %d bytes, %v bpw", len(rf.Modules), rf.LayerBytes, rf.BPWLayer, len(rp.Modules), rp.LayerBytes, rp.BPWLayer)
			}
			for _, mi := range rf.Modules {
				if mi.Module == g0 && (mi.Out != spec.MoE.Intermediate || mi.In != spec.Hidden || mi.BPW != 16) {
					t.Errorf("fused expert module %+v", mi)
				}
			}

			// Both layouts in one checkpoint: the per-expert Linears are read,
			// the fused tensors are unused and named.
			both := mergeCheckpoints(t, fused, per, nil)
			mb, err := arch.OpenDir(both)
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Close()
			_, err = New(mb, Options{})
			var ue *checkpoint.UnusedError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), gu) {
				t.Errorf("both layouts: %v, want the unused fused tensors named", err)
			}

			// Gate and up halves swapped: another model.
			swapped := mergeCheckpoints(t, fused, "", func(name string, ti checkpoint.TensorInfo, raw []byte) []byte {
				if !strings.HasSuffix(name, ".experts.gate_up_proj") {
					return raw
				}
				out := make([]byte, len(raw))
				half := len(raw) / ti.Shape[0] / 2
				for e := 0; e < ti.Shape[0]; e++ {
					copy(out[(2*e)*half:], raw[(2*e+1)*half:(2*e+2)*half])
					copy(out[(2*e+1)*half:], raw[(2*e)*half:(2*e+1)*half])
				}
				return out
			})
			bs, _ := openBackend(t, swapped)
			if d, _, _ := maxAbsDiff(allLogProbs(t, bs, toks), got); d < 1e-6 {
				t.Errorf("gate and up swapped: log-probs within %g", d)
			}
		})
	}
}

// mergeCheckpoints writes a copy of dir a (its config and tokenizer) whose
// tensors are a's (passed through edit when not nil) plus those of b that a
// lacks (b "" for none).
func mergeCheckpoints(t *testing.T, a, b string, edit func(string, checkpoint.TensorInfo, []byte) []byte) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "merged")
	var ts []checkpoint.WriteTensor
	seen := map[string]bool{}
	for _, dir := range []string{a, b} {
		if dir == "" {
			continue
		}
		m, err := checkpoint.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close() // the tensors' bytes are the model's until it is closed
		for _, name := range m.Names() {
			if seen[name] {
				continue
			}
			seen[name] = true
			ti, _ := m.Tensor(name)
			raw, err := m.ReadRaw(name)
			if err != nil {
				t.Fatal(err)
			}
			if edit != nil && dir == a {
				raw = edit(name, ti, raw)
			}
			ts = append(ts, checkpoint.WriteTensor{Name: name, DType: ti.DType, Shape: ti.Shape, Data: raw})
		}
	}
	copyDir(t, a, out)
	if err := checkpoint.WriteFile(filepath.Join(out, checkpoint.SafetensorsFile), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return out
}

// copyDir copies the files of src (config, tokenizer, weights) into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
