package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
)

// issue 11 item 4: with a u16 base store, PPL(base) read 339.343 instead of
// 340.639 and the PPL ratio's sign flipped (1.00174 vs 0.99793 with f32).
// The base store now carries the base run's exact target NLL and top ids:
// every paired figure is identical whatever the encoding (u16, f32, f64,
// llama.cpp's file), PPL(base) is the base run's own PPL, and only KLD
// differs (by llama.cpp's cut).
func TestKLDBaseEncodingShiftsOnlyKLD(t *testing.T) {
	base, tokens := evalFixture(t, 1, 200)
	other, _ := evalFixture(t, 2, 10)
	dir := t.TempDir()
	for _, method := range []string{"compare_q", "llamacpp"} {
		t.Run(method, func(t *testing.T) {
			common := []string{"--tokens", tokens, "--ctx", "32", "--method", method}
			if method != "llamacpp" {
				common = append(common, "--stride", "16")
			}
			run := func(args ...string) compare.Result {
				t.Helper()
				out := filepath.Join(dir, "r.json")
				code, _, stderr := runQPPL(t, append(append(append([]string{"eval"}, args...), common...), "--json", out)...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				r, _ := readResult(t, out)
				return r
			}
			formats := []string{"f64", "f32", "u16"}
			if method == "llamacpp" {
				formats = append(formats, "llamacpp")
			}
			var ref *compare.KLDStats
			var basePPL float64
			for _, f := range formats {
				store := filepath.Join(dir, method+"."+f)
				b := run("--model", base, "--save-logits", store, "--logits-format", f)
				if basePPL == 0 {
					basePPL = b.PPL
				} else if b.PPL != basePPL {
					t.Errorf("%s: base PPL %v, want %v", f, b.PPL, basePPL)
				}
				q := run("--model", other, "--kld-base", store)
				k := q.KLD
				if k == nil {
					t.Fatalf("%s: no KLD", f)
				}
				if k.BasePPL != basePPL {
					t.Errorf("%s: PPL(base) %v, the base run's PPL is %v", f, k.BasePPL, basePPL)
				}
				if ref == nil {
					ref = k
					continue
				}
				for _, c := range []struct {
					name      string
					got, want float64
				}{
					{"PPL(base)", k.BasePPL, ref.BasePPL}, {"PPL(base) SE", k.BasePPLSE, ref.BasePPLSE},
					{"PPL(Q)", k.PPL, ref.PPL}, {"PPL ratio", k.PPLRatio, ref.PPLRatio}, {"ln PPL ratio", k.LnPPLRatio, ref.LnPPLRatio},
					{"PPL ratio SE", k.PPLRatioSE, ref.PPLRatioSE}, {"PPL diff", k.PPLDiff, ref.PPLDiff}, {"PPL diff SE", k.PPLDiffSE, ref.PPLDiffSE},
					{"correlation", k.NLLCorrelation, ref.NLLCorrelation}, {"Δp mean", k.DeltaP.Mean, ref.DeltaP.Mean},
					{"Δp RMS", k.DeltaP.RMS, ref.DeltaP.RMS}, {"Δp p99", k.DeltaP.Percentiles.P99, ref.DeltaP.Percentiles.P99},
					{"same top", k.SameTop, ref.SameTop},
				} {
					if c.got != c.want {
						t.Errorf("%s: %s %v, f64 gives %v", f, c.name, c.got, c.want)
					}
				}
				if len(k.TopK) == 0 || len(k.TopK) != len(ref.TopK) || k.TopK[0] != ref.TopK[0] {
					t.Errorf("%s: top-K agreement %+v, f64 gives %+v", f, k.TopK, ref.TopK)
				}
				if d := k.Mean - ref.Mean; d > 1e-3 || d < -1e-3 {
					t.Errorf("%s: KLD %v vs f64 %v", f, k.Mean, ref.Mean)
				}
			}
		})
	}
}

// eval and compare write base stores in one default encoding, f32.
func TestDefaultBaseEncoding(t *testing.T) {
	if e, err := compare.ParseEncoding(""); err != nil || e != compare.EncodingF32 || compare.DefaultEncoding != compare.EncodingF32 {
		t.Errorf("default encoding %q %v", e, err)
	}
	base, tokens := evalFixture(t, 1, 100)
	store := filepath.Join(t.TempDir(), "b.logp")
	if code, _, stderr := runQPPL(t, "eval", "--model", base, "--tokens", tokens, "--ctx", "32", "--stride", "16", "--save-logits", store); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s, err := compare.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := s.Header(); h.Encoding != compare.EncodingF32 || h.Version != compare.StoreVersion || h.TargetTopK != compare.StoreTopK {
		t.Errorf("eval --save-logits default: encoding %s version %d target top-k %d", h.Encoding, h.Version, h.TargetTopK)
	}
	for _, cmd := range []string{"eval", "compare"} {
		_, help, _ := runQPPL(t, cmd, "--help")
		if !strings.Contains(help, `(default: "f32")`) {
			t.Errorf("%s --help does not show the f32 default:\n%s", cmd, help)
		}
	}
}
