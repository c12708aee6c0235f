package compare

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qppl/qppl/backends"
)

func toyTokens(n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*i + 3*i) % vocab)
	}
	return t
}

// The runner's per-token NLL equal the toy model's closed form, and PPL
// the pooled mean, for a compare_q run.
func TestRunnerPPL(t *testing.T) {
	m := &toyModel{vocab: 11}
	toks := toyTokens(100, 11)
	ws, err := Windows(toks, WindowOptions{Method: MethodCompareQ, Ctx: 16, Stride: 8})
	if err != nil {
		t.Fatal(err)
	}
	var journaled []WindowResult
	r := &Runner{Backend: m, Windows: ws, Top1: true, OnWindow: func(w WindowResult) error { journaled = append(journaled, w); return nil }}
	out, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(ws) || len(journaled) != len(ws) {
		t.Fatalf("%d results, %d journaled, %d windows", len(out), len(journaled), len(ws))
	}
	var sum float64
	var n int
	for i, w := range ws {
		for p := 1; p < len(w.Tokens); p++ {
			want := -m.logProbs(w.Tokens, p-1)[w.Tokens[p]]
			if got := out[i].NLL[p-1]; got != want {
				t.Fatalf("window %d pos %d: %v want %v", i, p, got, want)
			}
			if out[i].Top1[p-1] != argmax(m.logProbs(w.Tokens, p-1)) {
				t.Fatalf("top1 mismatch")
			}
			sum += want
			n++
		}
	}
	res, err := Reduce(out, ReduceOptions{Bootstrap: -1})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ppl", res.PPL, math.Exp(sum/float64(n)), 1e-14)
}

// Base run with --save-logits then a quantized run against the store: KL,
// base NLL, top-1 and top-K match an independent computation; f64 is exact.
func TestRunnerKLStore(t *testing.T) {
	for _, tc := range []struct {
		enc  Encoding
		mode KLMode
	}{{EncodingF64, KLScored}, {EncodingF32, KLScored}, {EncodingU16, KLScored}, {EncodingF64, KLCompareQ}, {EncodingU16, KLCompareQ}} {
		t.Run(string(tc.enc)+"-"+string(tc.mode), func(t *testing.T) {
			base := &toyModel{vocab: 13}
			quant := &toyModel{vocab: 13, shift: 0.3}
			toks := toyTokens(120, 13)
			ws, err := Windows(toks, WindowOptions{Method: MethodCompareQ, Ctx: 20, Stride: 10})
			if err != nil {
				t.Fatal(err)
			}
			layout, err := StoreLayout(ws, tc.mode, 3)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "base.logp")
			spec := DataSpec{Method: "compare_q", Ctx: 20, Stride: 10, TokensHash: TokensHash(toks)}
			h := StoreHeader{Encoding: tc.enc, Vocab: 13, KLMode: tc.mode, KLRows: 3, DataSpecHash: spec.Hash(), ModelHash: "m", Windows: layout}
			sw, err := CreateStore(path, h, toks)
			if err != nil {
				t.Fatal(err)
			}
			baseOut, err := (&Runner{Backend: base, Windows: ws, Save: sw}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := sw.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Check(StoreExpect{DataSpecHash: spec.Hash(), Vocab: 13}); err != nil {
				t.Fatal(err)
			}
			out, err := (&Runner{Backend: quant, Windows: ws, Base: st, TopK: 3}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tolLP := 0.0
			switch tc.enc {
			case EncodingF32:
				tolLP = 1e-6
			case EncodingU16:
				tolLP = 16.0 / 65535
			}
			klRows := 0
			for i, w := range ws {
				// Base run NLL from its log-probs equal the closed form.
				for p := w.First; p < len(w.Tokens); p++ {
					if got, want := baseOut[i].NLL[p-w.First], -base.logProbs(w.Tokens, p-1)[w.Tokens[p]]; got != want {
						t.Fatalf("base NLL %v want %v", got, want)
					}
				}
				wr := out[i]
				if tc.mode == KLCompareQ && i >= 3 {
					if wr.HasBase() {
						t.Fatalf("window %d has KL beyond kld rows", i)
					}
					continue
				}
				klRows++
				var pos []int
				if tc.mode == KLCompareQ {
					for p := 0; p < len(w.Tokens); p++ {
						pos = append(pos, p)
					}
				} else {
					for p := w.First; p < len(w.Tokens); p++ {
						pos = append(pos, p-1)
					}
				}
				if len(wr.KL) != len(pos) {
					t.Fatalf("window %d: %d KL, want %d", i, len(wr.KL), len(pos))
				}
				stored, ok, err := st.Window(w)
				if err != nil || !ok {
					t.Fatalf("window %d not in the store: %v", i, err)
				}
				dec := make([]float64, 13)
				for k, p := range pos {
					want := klRef(base.logProbs(w.Tokens, p), quant.logProbs(w.Tokens, p))
					if tc.enc == EncodingF64 && wr.KL[k] != want {
						t.Fatalf("KL %v want %v", wr.KL[k], want)
					}
					if math.Abs(wr.KL[k]-want) > 20*tolLP+1e-15 {
						t.Fatalf("KL %v want %v", wr.KL[k], want)
					}
					// Exactly the KL of the stored (decoded) base row at this
					// position, with llama.cpp's floor for u16: entries at or
					// below -16 have probability 0, decoded values above 0
					// are log-probs of 0.
					if err := stored.LogProbs(k, dec); err != nil {
						t.Fatal(err)
					}
					if tc.enc == EncodingU16 {
						for j, v := range dec {
							if v <= -16 {
								dec[j] = math.Inf(-1)
							} else if v > 0 {
								dec[j] = 0
							}
						}
					}
					if exact := klRef(dec, quant.logProbs(w.Tokens, p)); wr.KL[k] != exact {
						t.Fatalf("window %d KL position %d: %v, want %v from the stored row", i, k, wr.KL[k], exact)
					}
				}
				for p := w.First; p < len(w.Tokens); p++ {
					blp := base.logProbs(w.Tokens, p-1)
					if d := math.Abs(wr.BaseNLL[p-w.First] + blp[w.Tokens[p]]); d > tolLP*1.01+1e-7*tolLP {
						t.Fatalf("base NLL off by %v", d)
					}
					ids := make([]int32, 3)
					topKRef(blp, ids)
					if tc.enc != EncodingU16 && wr.BaseTop1[p-w.First] != ids[0] {
						t.Fatalf("base top1")
					}
					qids := make([]int32, 3)
					topKRef(quant.logProbs(w.Tokens, p-1), qids)
					if tc.enc == EncodingF64 && wr.TopKOverlap[p-w.First] != overlap(ids, qids) {
						t.Fatalf("overlap")
					}
				}
			}
			res, err := Reduce(out, ReduceOptions{KLMode: string(tc.mode), TopK: 3, Bootstrap: -1})
			if err != nil {
				t.Fatal(err)
			}
			if res.KLD == nil || res.KLD.Rows != klRows {
				t.Fatalf("kld %+v", res.KLD)
			}
		})
	}
}

// The u16 scheme on a hand example: lp = {-0.5, -1.5, -30}: hi = -0.5,
// lo = max(-30, -16.5) = -16.5, scale = 16/65535, q = {65535, 61439, 0}.
func TestU16Hand(t *testing.T) {
	rec := make([]byte, 2*(2*2+4))
	encodeU16([]float64{-0.5, -1.5, -30}, make([]float32, 3), rec)
	scale := math.Float32frombits(uint32(rec[0]) | uint32(rec[1])<<8 | uint32(rec[2])<<16 | uint32(rec[3])<<24)
	if scale != float32(16)/65535 {
		t.Errorf("scale %v", scale)
	}
	q := []uint16{uint16(rec[8]) | uint16(rec[9])<<8, uint16(rec[10]) | uint16(rec[11])<<8, uint16(rec[12]) | uint16(rec[13])<<8}
	if q[0] != 65535 || q[1] != 61439 || q[2] != 0 {
		t.Errorf("q = %v", q)
	}
	dst := make([]float64, 3)
	decodeU16(rec, dst)
	if math.Abs(dst[0]+0.5) > 1e-5 || math.Abs(dst[1]+1.5) > 2.5e-4 || dst[2] != -16.5 {
		t.Errorf("decoded %v", dst)
	}
	for _, c := range []struct {
		f float32
		n int32
	}{{0.5, 0}, {1.5, 2}, {2.5, 2}, {65534.6, 65535}, {3.49, 3}} {
		if got := nearestInt(c.f); got != c.n {
			t.Errorf("nearestInt(%v) = %d want %d", c.f, got, c.n)
		}
	}
}

// The llama.cpp container: byte layout of the header, readable back,
// tokens checked, and a stale data spec refused.
func TestLlamaCppStore(t *testing.T) {
	const V, ctx = 9, 8
	base := &toyModel{vocab: V}
	toks := toyTokens(40, V)
	ws, err := Windows(toks, WindowOptions{Method: MethodLlamaCpp, Ctx: ctx, BOS: 1})
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := StoreLayout(ws, KLScored, 0)
	spec := DataSpec{Method: "llamacpp", Ctx: ctx, TokensHash: TokensHash(toks)}
	path := filepath.Join(t.TempDir(), "base.kld")
	sw, err := CreateStore(path, StoreHeader{Container: ContainerLlamaCpp, Encoding: EncodingU16, Vocab: V, KLMode: KLScored, Method: "llamacpp", Ctx: ctx, DataSpecHash: spec.Hash(), Windows: layout}, toks)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Runner{Backend: base, Windows: ws, Save: sw}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	nv := 2*((V+1)/2) + 4
	per := ctx - 1 - ctx/2
	if string(b[:8]) != "_logits_" || le32i(b[8:]) != ctx || le32i(b[12:]) != V || le32i(b[16:]) != 5 || le32i(b[20:]) != toks[0] || le32i(b[20+4*39:]) != toks[39] {
		t.Fatalf("header %q %v", b[:8], b[8:24])
	}
	records := 20 + 4*40 + 5*per*nv*2
	if !bytes.HasSuffix(b, []byte("QPPLKEY1")) || len(b) <= records {
		t.Fatalf("size %d, records end at %d", len(b), records)
	}
	// The same file without our trailer (as llama.cpp writes it) reads too.
	plain := filepath.Join(t.TempDir(), "plain.kld")
	os.WriteFile(plain, b[:records], 0o644)
	for _, p := range []string{path, plain} {
		st, err := OpenStore(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Check(StoreExpect{DataSpecHash: spec.Hash()}); err != nil {
			t.Fatal(err)
		}
		lp, ok, err := st.Window(ws[2])
		if err != nil || !ok || lp.Len() != per {
			t.Fatalf("window: %v %v", ok, err)
		}
		dst := make([]float64, V)
		lp.LogProbs(0, dst)
		want := base.logProbs(ws[2].Tokens, ctx/2)
		for j := range dst {
			if math.Abs(dst[j]-want[j]) > 16.0/65535 {
				t.Fatalf("decoded %v want %v", dst, want)
			}
		}
		// Other text is refused by its tokens.
		other := ws[2]
		other.Tokens = append([]int32(nil), other.Tokens...)
		other.Tokens[3]++
		if _, _, err := st.Window(other); err == nil || !strings.Contains(err.Error(), "made from other text") {
			t.Errorf("other tokens: %v", err)
		}
		st.Close()
	}
	st, _ := OpenStore(path)
	defer st.Close()
	if err := st.Check(StoreExpect{DataSpecHash: "feedface"}); err == nil || !strings.Contains(err.Error(), "stale or mismatched") {
		t.Errorf("stale spec: %v", err)
	}
}

func le32i(b []byte) int32 {
	return int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// Broken files are refused with a message naming the file.
func TestStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	ws, _ := Windows(toyTokens(50, 7), WindowOptions{Method: MethodCompareQ, Ctx: 10, Stride: 10})
	layout, _ := StoreLayout(ws, KLScored, 0)
	path := filepath.Join(dir, "ok")
	sw, err := CreateStore(path, StoreHeader{Encoding: EncodingF32, Vocab: 7, KLMode: KLScored, Windows: layout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Runner{Backend: &toyModel{vocab: 7}, Windows: ws, Save: sw}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	huge := append([]byte("_logits_"), 0, 0, 0, 0x40, 9, 0, 0, 0, 1, 0, 0, 0)
	cases := map[string][]byte{
		"truncated":              good[:len(good)-3],
		"size":                   append(append([]byte(nil), good...), 1),
		"not a base log-prob":    []byte("hello world, definitely not"),
		"too short":              []byte("abc"),
		"out of range":           huge,
		"exceeds the file":       append([]byte("QPPLLOGP"), 0xff, 0xff, 0xff, 0x0f),
		"unexpected bytes after": append(append([]byte("_logits_"), 4, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0), make([]byte, 16+10*1+7)...),
	}
	for want, data := range cases {
		p := filepath.Join(dir, "bad")
		os.WriteFile(p, data, 0o644)
		_, err := OpenStore(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) || !errors.Is(err, ErrStore) {
			t.Errorf("%s: %v", want, err)
		}
	}
	// An incomplete writer refuses to close and leaves no file.
	p := filepath.Join(dir, "partial")
	sw, _ = CreateStore(p, StoreHeader{Encoding: EncodingF32, Vocab: 7, KLMode: KLScored, Windows: layout}, nil)
	if err := sw.Close(); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("incomplete: %v", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Error("partial store left behind")
	}
}

type nanModel struct{ toyModel }

func (m *nanModel) Score(ctx context.Context, w backends.Window, req backends.Request) (backends.Scores, error) {
	sc, err := m.toyModel.Score(ctx, w, req)
	if w.Index == 2 {
		sc.NLL[4] = math.NaN()
	}
	return sc, err
}

func TestRunnerErrors(t *testing.T) {
	toks := toyTokens(60, 7)
	ws, _ := Windows(toks, WindowOptions{Method: MethodCompareQ, Ctx: 10, Stride: 10})
	_, err := (&Runner{Backend: &nanModel{toyModel{vocab: 7}}, Windows: ws}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "window 2 position 5: NLL NaN") {
		t.Errorf("NaN: %v", err)
	}
	_, err = (&Runner{Backend: &toyModel{vocab: 5}, Windows: ws}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "outside the vocabulary [0, 5)") {
		t.Errorf("vocab: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	out, err := (&Runner{Backend: &toyModel{vocab: 7}, Windows: ws, OnWindow: func(WindowResult) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	}}).Run(ctx)
	if len(out) != 2 || !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %d windows, %v", len(out), err)
	}
	// Skip (resume/shard) leaves windows out.
	out, err = (&Runner{Backend: &toyModel{vocab: 7}, Windows: ws, Skip: func(i int) bool { return i%2 == 1 }}).Run(context.Background())
	if err != nil || len(out) != 3 || out[1].Index != 2 {
		t.Errorf("skip: %d %v", len(out), err)
	}
}

// A sharded run reduced together equals the unsharded run bit for bit.
func TestShardMergeBitIdentical(t *testing.T) {
	m := &toyModel{vocab: 11}
	ws, _ := Windows(toyTokens(300, 11), WindowOptions{Method: MethodCompareQ, Ctx: 32, Stride: 16})
	all, _ := (&Runner{Backend: m, Windows: ws}).Run(context.Background())
	var merged []WindowResult
	for s := 2; s >= 0; s-- {
		part, _ := (&Runner{Backend: m, Windows: ws, Skip: func(i int) bool { return i%3 != s }}).Run(context.Background())
		merged = append(merged, part...)
	}
	a, _ := Reduce(all, ReduceOptions{Seed: 1})
	b, _ := Reduce(merged, ReduceOptions{Seed: 1})
	if a.PPL != b.PPL || a.NLLMeanSE != b.NLLMeanSE || *a.PPLBootstrap != *b.PPLBootstrap {
		t.Errorf("sharded %v != %v", b.PPL, a.PPL)
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := &Progress{W: &buf, Now: func() time.Time { return now }}
	p.Start(4, 400)
	now = now.Add(500 * time.Millisecond)
	p.Update(1, 100)
	if buf.Len() != 0 {
		t.Fatalf("drew before one second: %q", buf.String())
	}
	now = now.Add(1500 * time.Millisecond)
	p.Update(2, 200)
	want := "\r[===============               ] 2/4 windows  100 tok/s  elapsed 0:02  ETA 0:02 "
	if buf.String() != want {
		t.Fatalf("got %q\nwant %q", buf.String(), want)
	}
	p.Finish()
	if !strings.HasSuffix(buf.String(), "\n") {
		t.Error("no final newline")
	}
	// A short run prints nothing.
	buf.Reset()
	p.Start(1, 10)
	p.Update(1, 10)
	p.Finish()
	if buf.Len() != 0 {
		t.Errorf("short run printed %q", buf.String())
	}
}

// With a u16 store, entries ≤ −16 reach the backend as −Inf (probability
// 0, skipped in KL as llama.cpp does) while the base NLL of a target uses
// the raw decoded value, as llama.cpp's nll_base does.
func TestU16FloorObserver(t *testing.T) {
	// Row: token 0 very likely, token 2 far below −16.
	lp := []float64{-1e-9, -5, -40, -3}
	ws := []backends.Window{{Index: 0, Tokens: []int32{1, 2}, First: 1}}
	layout, _ := StoreLayout(ws, KLScored, 0)
	path := filepath.Join(t.TempDir(), "s")
	sw, err := CreateStore(path, StoreHeader{Encoding: EncodingU16, Vocab: 4, KLMode: KLScored, Windows: layout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Write(0, 0, lp); err != nil {
		t.Fatal(err)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src, _, err := st.Window(ws[0])
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]float64, 4)
	src.LogProbs(0, raw)
	obs := newBaseObserver(src, ws[0], KLScored, 2)
	got := make([]float64, 4)
	if err := obs.LogProbs(0, got); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(got[2], -1) || raw[2] > -16 || got[1] != raw[1] || got[0] > 0 {
		t.Errorf("raw %v, to backend %v", raw, got)
	}
	if obs.baseNLL[0] != -raw[2] || obs.baseTop[0] != 0 || obs.baseTop[1] != 3 {
		t.Errorf("base NLL %v (raw %v), top %v", obs.baseNLL[0], -raw[2], obs.baseTop)
	}
}

// A store file that shrinks after it was opened gives an error when a
// missing record is read, never stale or zero log-probs.
func TestStoreShrunkAfterOpen(t *testing.T) {
	ws := []backends.Window{{Index: 0, Tokens: []int32{1, 2, 3}, First: 1}}
	layout, _ := StoreLayout(ws, KLScored, 0)
	path := filepath.Join(t.TempDir(), "s")
	sw, err := CreateStore(path, StoreHeader{Encoding: EncodingF64, Vocab: 4, KLMode: KLScored, Windows: layout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pos := 0; pos < 2; pos++ {
		if err := sw.Write(0, pos, []float64{-1, -2, -3, -0.5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lp, _, err := st.Window(ws[0])
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-8); err != nil { // the last entry of position 1
		t.Fatal(err)
	}
	dst := make([]float64, 4)
	if err := lp.LogProbs(0, dst); err != nil || dst[3] != -0.5 {
		t.Fatalf("position 0: %v %v", dst, err)
	}
	if err := lp.LogProbs(1, dst); err == nil || !strings.Contains(err.Error(), "24 of 32 bytes") {
		t.Fatalf("position 1 of a shrunk file: err %v", err)
	}
}

// Issue 11 item 9: when stderr is not a terminal, progress is a plain line
// at most every PlainInterval (no carriage return in log files), preceded
// once by the header.
func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := &Progress{W: &buf, Now: func() time.Time { return now }, Plain: true, Header: "data: x\nmodel: y"}
	p.Start(100, 1000)
	for i := 1; i <= 100; i++ {
		now = now.Add(time.Second)
		p.Update(i, int64(10*i))
	}
	p.Finish()
	want := "data: x\nmodel: y\n" +
		"progress: 1/100 windows  10 tok/s  elapsed 0:01  ETA 1:39\n" +
		"progress: 11/100 windows  10 tok/s  elapsed 0:11  ETA 1:29\n"
	if got := buf.String(); !strings.HasPrefix(got, want) || strings.Contains(got, "\r") || strings.Count(got, "\n") != 2+11 {
		t.Errorf("plain progress:\n%q\nwant lines every 10 s starting\n%q", got, want)
	}
	if NewProgress(&buf, "").Plain != true {
		t.Error("a buffer is not a terminal: plain lines")
	}
}

// Issue 11 item 9: a run whose first window is slow says what it is doing
// after Delay, before the first window ends.
func TestProgressBeforeFirstWindow(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	p := &Progress{W: syncWriter{&mu, &buf}, Plain: true, Delay: 20 * time.Millisecond, Header: "data: x"}
	p.Start(3, 30)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		s := buf.String()
		mu.Unlock()
		if strings.Contains(s, "progress: 0/3 windows") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Finish()
	mu.Lock()
	defer mu.Unlock()
	if got := buf.String(); !strings.HasPrefix(got, "data: x\nprogress: 0/3 windows") {
		t.Errorf("nothing said while the first window runs: %q", got)
	}
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
