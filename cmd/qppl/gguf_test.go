package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/compare/suite"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/gguf"
	"github.com/qppl/qppl/gguf/ggml"
	"github.com/qppl/qppl/internal/ggufgen"
)

// TestEvalGGUF: qppl eval --model FILE.gguf (the F32 conversion of a
// fixture, tokenizer.json beside it) gives the safetensors model's PPL
// bit for bit, from a text file too; bpw is accounted from the GGUF.
func TestEvalGGUF(t *testing.T) {
	model, tokens := evalFixture(t, 1, 130)
	dir := t.TempDir()
	g := filepath.Join(dir, "model.gguf")
	if err := gguf.ConvertFile(model, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	outST, outG := filepath.Join(dir, "st.json"), filepath.Join(dir, "g.json")
	if code, _, stderr := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "32", "--stride", "16", "--json", outST); code != 0 {
		t.Fatalf("safetensors: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runQPPL(t, "eval", "--model", g, "--tokens", tokens, "--ctx", "32", "--stride", "16", "--json", outG); code != 0 {
		t.Fatalf("gguf: exit %d: %s", code, stderr)
	}
	rs, _ := readResult(t, outST)
	rg, _ := readResult(t, outG)
	if rs.PPL != rg.PPL || rs.TokensScored != rg.TokensScored || !(rs.PPL > 1) {
		t.Fatalf("GGUF PPL %v (%d tokens), safetensors %v (%d)", rg.PPL, rg.TokensScored, rs.PPL, rs.TokensScored)
	}
	if rg.BPWLayer != 32 || rg.BPWHead != 32 || rg.Format != "gguf-f32" {
		t.Errorf("GGUF bpw %v/%v format %q, want 32/32 gguf-f32", rg.BPWLayer, rg.BPWHead, rg.Format)
	}

	// --text: --tokenizer, or tokenizer.json beside the .gguf (absent
	// here), or else the tokenizer rebuilt from the file's metadata (the
	// fixture's is GPT-2's pipeline: tokenizer.ggml.pre "gpt-2"); a file
	// whose pre label qppl cannot rebuild exactly is refused, asking for
	// --tokenizer.
	text := filepath.Join(dir, "t.txt")
	os.WriteFile(text, []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 20)), 0o644)
	_, stdoutST, _ := runQPPL(t, "eval", "--model", model, "--text", text, "--ctx", "32", "--stride", "16")
	for _, extra := range [][]string{{"--tokenizer", model}, nil} {
		code, stdout, stderr := runQPPL(t, append([]string{"eval", "--model", g, "--text", text, "--ctx", "32", "--stride", "16"}, extra...)...)
		if code != 0 || pplLine(stdout) != pplLine(stdoutST) || pplLine(stdout) == "" {
			t.Fatalf("%v: exit %d: %s\n%s\nsafetensors:\n%s", extra, code, stderr, stdout, stdoutST)
		}
	}
	other := filepath.Join(dir, "other-pre.gguf")
	if err := ggufgen.Edit(g, other, func(kvs []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range kvs {
			if kvs[i].Key == "tokenizer.ggml.pre" {
				kvs[i].Value = gguf.StringValue("deepseek-llm")
			}
		}
		return kvs, ts
	}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runQPPL(t, "eval", "--model", other, "--text", text, "--ctx", "32", "--stride", "16")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "--tokenizer") || !strings.Contains(stderr, `"deepseek-llm"`) || !strings.Contains(stderr, other) {
		t.Fatalf("pre deepseek-llm without a tokenizer: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runQPPL(t, "eval", "--model", other, "--text", text, "--ctx", "32", "--stride", "16", "--tokenizer", model); code != 0 {
		t.Fatalf("pre deepseek-llm with --tokenizer: exit %d: %s", code, stderr)
	}
}

// pplLine returns the summary's PPL line.
func pplLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "PPL") {
			return l
		}
	}
	return ""
}

// TestEvalGGUFRefusals: a hostile or mismatched GGUF is exit 2 with the
// file and field named, before any work.
func TestEvalGGUFRefusals(t *testing.T) {
	model, tokens := evalFixture(t, 1, 130)
	dir := t.TempDir()
	g := filepath.Join(dir, "model.gguf")
	if err := gguf.ConvertFile(model, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(g)
	trunc := filepath.Join(dir, "trunc.gguf")
	os.WriteFile(trunc, data[:len(data)/2], 0o644)
	lying := filepath.Join(dir, "lying.gguf")
	bad := append([]byte(nil), data...)
	bad[15] = 0x10 // tensor_count's high byte
	os.WriteFile(lying, bad, 0o644)

	// A tokenizer whose id 511 is another string.
	editTok := filepath.Join(dir, "tok")
	os.MkdirAll(editTok, 0o755)
	tj, _ := os.ReadFile(filepath.Join(model, "tokenizer.json"))
	tj = []byte(strings.ReplaceAll(string(tj), "<|end_of_text|>", "<|eot|>"))
	os.WriteFile(filepath.Join(editTok, "tokenizer.json"), tj, 0o644)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"truncated", []string{"--model", trunc}, []string{trunc, "truncated"}},
		{"lying count", []string{"--model", lying}, []string{lying, "tensor_count"}},
		{"missing", []string{"--model", filepath.Join(dir, "nope.gguf")}, []string{"nope.gguf"}},
		{"other vocabulary", []string{"--model", g, "--tokenizer", editTok}, []string{"tokenizer.ggml.tokens", editTok}},
		{"allow unused", []string{"--model", g, "--allow-unused-tensors"}, []string{"--allow-unused-tensors", g}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runQPPL(t, append([]string{"eval", "--tokens", tokens, "--ctx", "32"}, c.args...)...)
			if code != 2 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
		})
	}
}

// TestConvertCommand: qppl convert --to gguf writes a file that qppl eval
// reads back with the safetensors PPL (f32), and refuses bad flags and
// models with exit 2.
func TestConvertCommand(t *testing.T) {
	model, tokens := evalFixture(t, 1, 130)
	dir := t.TempDir()
	out := filepath.Join(dir, "m.gguf")
	code, stdout, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", out)
	if code != 0 || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	_, a, _ := runQPPL(t, "eval", "--model", out, "--tokens", tokens, "--ctx", "32")
	_, b, _ := runQPPL(t, "eval", "--model", model, "--tokens", tokens, "--ctx", "32")
	if pplLine(a) == "" || pplLine(a) != pplLine(b) {
		t.Fatalf("GGUF %q vs safetensors %q", pplLine(a), pplLine(b))
	}
	f16 := filepath.Join(dir, "m16.gguf")
	if code, _, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", f16, "--type", "f16"); code != 0 {
		t.Fatalf("f16: exit %d: %s", code, stderr)
	}
	if st16, _ := os.Stat(f16); st16 == nil {
		t.Fatal("no f16 file")
	}
	// A quantized file type: written, read back, evaluated; not the f32 PPL.
	q := filepath.Join(dir, "mq.gguf")
	if code, stdout, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", q, "--type", "q4_k_m"); code != 0 || !strings.Contains(stdout, "Q4_K_M") {
		t.Fatalf("q4_k_m: exit %d: %s %s", code, stdout, stderr)
	}
	if _, c, _ := runQPPL(t, "eval", "--model", q, "--tokens", tokens, "--ctx", "32"); pplLine(c) == "" || pplLine(c) == pplLine(a) {
		t.Fatalf("Q4_K_M GGUF %q vs f32 %q", pplLine(c), pplLine(a))
	}
	for _, args := range [][]string{
		{"--model", model, "--to", "onnx", "--out", out},
		{"--model", model, "--to", "gguf", "--out", filepath.Join(dir, "x.bin")},
		{"--model", model, "--to", "gguf", "--out", out, "--type", "q2_k"}, // a llama.cpp type qppl does not write
		{"--model", filepath.Join(dir, "none"), "--to", "gguf", "--out", out},
		{"--model", model, "--to", "gguf", "--out", filepath.Join(dir, "no", "x.gguf")},
	} {
		if code, stdout, stderr := runQPPL(t, append([]string{"convert"}, args...)...); code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %s", args, code, stdout, stderr)
		}
	}
}

// TestCompareGGUFSpec: a compare_q model spec entry with "load_fn":
// "llamacpp" and a .gguf model_dir is scored natively on the same windows
// as the safetensors base: the F32 conversion has the base's PPL exactly
// and zero KL (up to the base store's encoding); a llamacpp entry without
// a .gguf is a usage error.
func TestCompareGGUFSpec(t *testing.T) {
	dir, base, _, text := cmpFixtures(t)
	g := filepath.Join(dir, "gg", "base-f32.gguf")
	os.MkdirAll(filepath.Dir(g), 0o755)
	if err := gguf.ConvertFile(base, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "data.json")
	os.WriteFile(ds, []byte(`{"tokenize_fn": "transformers", "tokenizer_dir": "`+base+`", "dataset": "demo", "data_file": "`+text+`", "eval_stride": 16, "eval_len": 32, "max_rows": 3}`), 0o644)
	ms := filepath.Join(dir, "models.json")
	os.WriteFile(ms, []byte(`[
		{"model_dir": "`+g+`", "load_fn": "llamacpp", "fwd_fn": "llamacpp", "label": "GGUF F32"},
		{"model_dir": "`+base+`", "load_fn": "transformers_auto", "fwd_fn": "transformers", "label": "FP32", "out_logits": "`+filepath.Join(dir, "logits")+`"}
	]`), 0o644)
	res := filepath.Join(dir, "r.json")
	code, out, errs := cmpRun(t, dir, "compare", "-d", ds, "-m", ms, "--cache-dir", filepath.Join(dir, "c"), "--json", res)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(errs, "not a Hugging Face loader") {
		t.Errorf("llamacpp loader warned about: %s", errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	var gr, br *compare.Result
	for i := range rs.Results {
		switch rs.Results[i].Label {
		case "GGUF F32":
			gr = &rs.Results[i]
		case "FP32":
			br = &rs.Results[i]
		}
	}
	if gr == nil || br == nil || gr.KLD == nil {
		t.Fatalf("results %+v", rs.Results)
	}
	if gr.PPL != br.PPL || gr.TokensScored != br.TokensScored || !(math.Abs(gr.KLD.Mean) < 1e-6) || gr.BPWLayer != 32 || gr.Format != "gguf-f32" {
		t.Errorf("GGUF PPL %v KLD %v bpw %v %s; base PPL %v", gr.PPL, gr.KLD.Mean, gr.BPWLayer, gr.Format, br.PPL)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"model_dir": "`+base+`", "load_fn": "llamacpp", "label": "x", "out_logits": "`+dir+`"}]`), 0o644)
	if code, _, errs := cmpRun(t, dir, "compare", "-d", ds, "-m", bad, "--cache-dir", filepath.Join(dir, "c")); code != exitUsage || !strings.Contains(errs, ".gguf") {
		t.Errorf("llamacpp without .gguf: exit %d %s", code, errs)
	}
}

// TestInspectGGUF: qppl inspect on a GGUF file whose layer-0 down_proj is
// Q8_0 (the rest F32): compare_q's bpw accounting with that tensor at
// 8.5 bpw, and the per-type breakdown.
func TestInspectGGUF(t *testing.T) {
	model, _ := evalFixture(t, 1, 10)
	dir := t.TempDir()
	g := filepath.Join(dir, "m.gguf")
	if err := gguf.ConvertFile(model, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.OpenModel(g, gguf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []gguf.WriteTensor
	var down int64
	for _, ti := range src.Files[0].Tensors {
		raw, _ := src.Files[0].ReadRaw(ti.Name)
		wt := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: raw}
		if ti.Name == "blk.0.ffn_down.weight" {
			down = ti.Numel()
			wt.Type, wt.Data = gguf.Q8_0, make([]byte, ti.Numel()/32*34)
		}
		ts = append(ts, wt)
	}
	kvs := src.Files[0].KVs
	src.Close()
	mixed := filepath.Join(dir, "mixed.gguf")
	fh, _ := os.Create(mixed)
	if err := gguf.Write(fh, kvs, ts); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	code, stdout, stderr := runQPPL(t, "inspect", "--model", mixed)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// 2 layers × 7 Linears of the fixture; one is Q8_0.
	var total int64
	m, _ := gguf.OpenModel(g, gguf.Options{})
	for i := 0; i < m.Spec.Layers; i++ {
		for _, l := range m.Spec.LayerLinears(i) {
			total += int64(l.Out * l.In)
		}
	}
	m.Close()
	want := (float64(total-down)*32 + float64(down)*8.5) / float64(total)
	for _, s := range []string{"format mixed: gguf-f32, gguf-q8_0", fmt.Sprintf("decoder layers: %.4f bpw", want), "q8_0", "8.5000", "per ggml type"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("inspect lacks %q:\n%s", s, stdout)
		}
	}
	if code, _, _ := runQPPL(t, "inspect", "--model", filepath.Join(dir, "none.gguf")); code != 2 {
		t.Errorf("missing file: exit %d", code)
	}
	// A type qppl does not decode (Q8_1, an activation type): eval refuses
	// before any work, naming the tensor and type.
	for i := range ts {
		if ts[i].Name == "blk.0.ffn_down.weight" {
			ts[i].Type, ts[i].Data = gguf.Q8_1, make([]byte, down/32*36)
		}
	}
	q81 := filepath.Join(dir, "q81.gguf")
	fh, _ = os.Create(q81)
	if err := gguf.Write(fh, kvs, ts); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	toks := filepath.Join(dir, "t.i32")
	os.WriteFile(toks, make([]byte, 4*40), 0o644)
	code, stdout, stderr = runQPPL(t, "eval", "--model", q81, "--tokens", toks, "--ctx", "16")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "blk.0.ffn_down.weight") || !strings.Contains(stderr, "q8_1") {
		t.Errorf("eval of a Q8_1 tensor: exit %d, %s", code, stderr)
	}
	// The Q8_0 file is decoded and evaluated.
	if code, _, stderr := runQPPL(t, "eval", "--model", mixed, "--tokens", toks, "--ctx", "16"); code != 0 {
		t.Errorf("eval of the Q8_0 file: exit %d, %s", code, stderr)
	}
}

// ggufMixed writes a GGUF file from the F32 conversion of model whose
// decoder Linears are Go-written blocks of the 32-element types, a
// different type per tensor (internal/ggufgen), and returns its path.
func ggufMixed(t *testing.T, f32 string) string {
	t.Helper()
	types := []ggml.Type{ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0, ggml.IQ4_NL, ggml.MXFP4}
	k := 0
	q := filepath.Join(t.TempDir(), "mixed.gguf")
	if err := ggufgen.Requantize(f32, q, 5, func(name string, ne []int64, own ggml.Type) ggml.Type {
		if len(ne) != 2 || !strings.HasPrefix(name, "blk.") {
			return own
		}
		k++
		return types[k%len(types)]
	}); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestEvalGGUFEmu: qppl eval --backend emu reads GGUF files: the F32
// conversion gives the safetensors model's emu PPL bit for bit (fp32 and
// bf16), a file of mixed quantized types the reference's PPL to fp32
// precision; qppl verify --backends reference,emu passes on it (bf16 and
// fp32 tolerances) and qppl compare scores a load_fn llamacpp entry on
// emu.
func TestEvalGGUFEmu(t *testing.T) {
	model, tokens := evalFixture(t, 1, 130)
	dir := t.TempDir()
	g := filepath.Join(dir, "model.gguf")
	if err := gguf.ConvertFile(model, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	ppl := func(args ...string) float64 {
		t.Helper()
		out := filepath.Join(t.TempDir(), "r.json")
		code, _, stderr := runQPPL(t, append([]string{"eval", "--tokens", tokens, "--ctx", "32", "--stride", "16", "--json", out}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		r, _ := readResult(t, out)
		return r.PPL
	}
	for _, prec := range []string{"fp32", "bf16"} {
		if a, b := ppl("--model", g, "--backend", "emu", "--precision", prec), ppl("--model", model, "--backend", "emu", "--precision", prec); a != b || !(a > 1) {
			t.Errorf("%s: emu PPL on the F32 GGUF %v, on safetensors %v", prec, a, b)
		}
	}
	q := ggufMixed(t, g)
	ref, emu := ppl("--model", q), ppl("--model", q, "--backend", "emu", "--precision", "fp32")
	t.Logf("mixed GGUF: reference PPL %.9g, emu fp32 %.9g", ref, emu)
	if !(math.Abs(emu-ref)/ref < 1e-5) {
		t.Errorf("mixed GGUF: emu fp32 PPL %v, reference %v", emu, ref)
	}
	for _, prec := range []string{"fp32", "bf16"} {
		code, stdout, stderr := runQPPL(t, "verify", "--model", q, "--backends", "reference,emu", "--precision", prec, "--tokens", tokens, "--ctx", "32", "--rows", "3", "--stride", "32")
		if code != 0 || !strings.Contains(stdout, "PASS") {
			t.Errorf("verify %s: exit %d\n%s\n%s", prec, code, stdout, stderr)
		}
	}
	// A GGUF whose values are far off the reference fails verify (the
	// check can fail): emu's bf16 rounding against fp64 tolerances.
	code, stdout, _ := runQPPL(t, "verify", "--model", q, "--backends", "reference,emu", "--tokens", tokens, "--ctx", "32", "--rows", "2", "--stride", "32", "--max-nll", "1e-12")
	if code == 0 || strings.Contains(stdout, "PASS") {
		t.Errorf("verify with --max-nll 1e-12 passed: %s", stdout)
	}
}

// TestCompareGGUFSpecEmu: a load_fn llamacpp entry is scored on emu too:
// the F32 conversion has the safetensors base's emu PPL bit for bit.
func TestCompareGGUFSpecEmu(t *testing.T) {
	dir, base, _, text := cmpFixtures(t)
	g := filepath.Join(dir, "gg", "base-f32.gguf")
	os.MkdirAll(filepath.Dir(g), 0o755)
	if err := gguf.ConvertFile(base, g, gguf.ConvertOptions{Type: gguf.F32}); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "data.json")
	os.WriteFile(ds, []byte(`{"tokenize_fn": "transformers", "tokenizer_dir": "`+base+`", "dataset": "demo", "data_file": "`+text+`", "eval_stride": 16, "eval_len": 32, "max_rows": 3}`), 0o644)
	ms := filepath.Join(dir, "models.json")
	os.WriteFile(ms, []byte(`[
		{"model_dir": "`+g+`", "load_fn": "llamacpp", "fwd_fn": "llamacpp", "label": "GGUF F32"},
		{"model_dir": "`+base+`", "load_fn": "transformers_auto", "fwd_fn": "transformers", "label": "FP32", "out_logits": "`+filepath.Join(dir, "logits")+`"}
	]`), 0o644)
	res := filepath.Join(dir, "r.json")
	code, out, errs := cmpRun(t, dir, "compare", "-d", ds, "-m", ms, "--cache-dir", filepath.Join(dir, "c"), "--json", res, "--backend", "emu", "--precision", "fp32")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	rs, err := suite.LoadResults(res)
	if err != nil {
		t.Fatal(err)
	}
	ppl := map[string]float64{}
	for _, r := range rs.Results {
		ppl[r.Label] = r.PPL
	}
	if ppl["GGUF F32"] != ppl["FP32"] || !(ppl["FP32"] > 1) {
		t.Errorf("emu: GGUF PPL %v, safetensors %v", ppl["GGUF F32"], ppl["FP32"])
	}
}

// TestQwen35GGUFCLI: qppl convert --to gguf writes the qwen3_5 and
// qwen3_5_moe fixtures as llama.cpp's qwen35 / qwen35moe; qppl verify
// --backends reference,emu passes on the file (fp32); --type f16 is
// refused (F32 only) and a file without a required qwen35 key exits 2
// naming the file and the key.
func TestQwen35GGUFCLI(t *testing.T) {
	for _, a := range []string{"qwen3_5", "qwen3_5_moe"} {
		t.Run(a, func(t *testing.T) {
			dir := t.TempDir()
			o, err := fixtures.Defaults(a)
			if err != nil {
				t.Fatal(err)
			}
			model := filepath.Join(dir, "model")
			if err := fixtures.Write(model, o); err != nil {
				t.Fatal(err)
			}
			ids := make([]int32, 100)
			for i := range ids {
				ids[i] = int32((i*i*7 + 3*i + 1) % o.Vocab)
			}
			tokens := filepath.Join(dir, "tokens.i32")
			if err := dataset.WriteTokens(tokens, ids); err != nil {
				t.Fatal(err)
			}
			g := filepath.Join(dir, "model.gguf")
			if code, _, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", g); code != 0 {
				t.Fatalf("convert: exit %d: %s", code, stderr)
			}
			code, stdout, stderr := runQPPL(t, "verify", "--model", g, "--backends", "reference,emu", "--precision", "fp32", "--tokens", tokens, "--ctx", "32", "--rows", "3", "--stride", "32")
			if code != 0 || !strings.Contains(stdout, "PASS") {
				t.Errorf("verify fp32: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if code, _, stderr := runQPPL(t, "convert", "--model", model, "--to", "gguf", "--out", filepath.Join(dir, "f16.gguf"), "--type", "f16"); code != 2 || !strings.Contains(stderr, "F32 only") {
				t.Errorf("convert --type f16: exit %d: %s", code, stderr)
			}
			arch := map[string]string{"qwen3_5": "qwen35", "qwen3_5_moe": "qwen35moe"}[a]
			bad := filepath.Join(dir, "bad.gguf")
			rewriteGGUF(t, g, bad, func(kvs []gguf.KV) []gguf.KV {
				var out []gguf.KV
				for _, kv := range kvs {
					if kv.Key != arch+".ssm.state_size" {
						out = append(out, kv)
					}
				}
				return out
			})
			code, _, stderr = runQPPL(t, "eval", "--model", bad, "--tokens", tokens, "--ctx", "32")
			if code != 2 || !strings.Contains(stderr, bad) || !strings.Contains(stderr, arch+".ssm.state_size") {
				t.Errorf("missing ssm.state_size: exit %d: %s", code, stderr)
			}
		})
	}
}

// rewriteGGUF copies a GGUF file with its metadata passed through edit.
func rewriteGGUF(t *testing.T, src, dst string, edit func([]gguf.KV) []gguf.KV) {
	t.Helper()
	fh, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	f, err := gguf.Open(fh, st.Size(), src)
	if err != nil {
		t.Fatal(err)
	}
	var ts []gguf.WriteTensor
	for _, ti := range f.Tensors {
		raw, err := f.ReadRaw(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: raw})
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := gguf.Write(out, edit(append([]gguf.KV(nil), f.KVs...)), ts); err != nil {
		t.Fatal(err)
	}
}
