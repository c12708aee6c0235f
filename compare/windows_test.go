package compare

import (
	"strings"
	"testing"

	"github.com/qppl/qppl/backends"
)

func seq(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(i)
	}
	return t
}

func TestWindowsCounts(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		o          WindowOptions
		windows    int
		scored     int64
		lastStart  int32
		lastTokens int
	}{
		// issue 2: n=12000, ctx 2048, stride 512, rows 20 → 40,940.
		{"compare_q rows20", 12000, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512, Rows: 20}, 20, 20 * 2047, 19 * 512, 2048},
		// range(0, 3072-2048, 512) = [0, 512]: the window [1024, 3072) ends at n and is excluded.
		{"compare_q excludes end", 3072, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512}, 2, 2 * 2047, 512, 2048},
		{"compare_q one more", 3073, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512}, 3, 3 * 2047, 1024, 2048},
		// exl3 ppl.py: range(0, 8192-2048, 2048) = 0, 2048, 4096.
		{"exl3 excludes end", 8192, WindowOptions{Method: MethodEXL3, Ctx: 2048, Stride: 7}, 3, 3 * 2047, 4096, 2048},
		{"exl3", 10000, WindowOptions{Method: MethodEXL3, Ctx: 2048}, 4, 4 * 2047, 6144, 2048},
		// llama.cpp: 5000/512 = 9 chunks, 255 scored each.
		{"llamacpp", 5000, WindowOptions{Method: MethodLlamaCpp, Ctx: 512, BOS: -1}, 9, 9 * 255, 8 * 512, 512},
		{"llamacpp chunks", 5000, WindowOptions{Method: MethodLlamaCpp, Ctx: 512, Rows: 4, BOS: -1}, 4, 4 * 255, 3 * 512, 512},
		// HF strided: every token but the first scored once.
		{"hf-strided", 1000, WindowOptions{Method: MethodHFStrided, Ctx: 256, Stride: 100}, 9, 999, 800, 200},
		{"hf-strided exact", 456, WindowOptions{Method: MethodHFStrided, Ctx: 256, Stride: 100}, 3, 455, 200, 256},
		// stride == ctx: each window's first token has no context and is skipped.
		{"hf-strided stride=ctx", 1000, WindowOptions{Method: MethodHFStrided, Ctx: 256, Stride: 256}, 4, 999 - 3, 768, 232},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := Windows(seq(tc.n), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != tc.windows {
				t.Fatalf("windows = %d, want %d", len(ws), tc.windows)
			}
			if got := ScoredTokens(ws); got != tc.scored {
				t.Errorf("scored = %d, want %d", got, tc.scored)
			}
			last := ws[len(ws)-1]
			if last.Tokens[1]-1 != tc.lastStart || len(last.Tokens) != tc.lastTokens {
				t.Errorf("last window starts %d len %d, want %d len %d", last.Tokens[1]-1, len(last.Tokens), tc.lastStart, tc.lastTokens)
			}
			for i, w := range ws {
				if w.Index != i {
					t.Errorf("window %d has Index %d", i, w.Index)
				}
			}
		})
	}
}

func TestWindowsLlamaCppBOS(t *testing.T) {
	toks := seq(2048)
	ws, err := Windows(toks, WindowOptions{Method: MethodLlamaCpp, Ctx: 512, BOS: 7777})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if w.Tokens[0] != 7777 || w.Tokens[1] != int32(i*512+1) || w.First != 257 || w.NumTargets() != 255 {
			t.Errorf("chunk %d: first %d second %d First %d targets %d", i, w.Tokens[0], w.Tokens[1], w.First, w.NumTargets())
		}
	}
	if toks[512] != 512 {
		t.Error("input stream modified")
	}
}

// Every token of the stream but the first is scored exactly once.
func TestWindowsHFStridedCoverage(t *testing.T) {
	for _, n := range []int{2, 3, 255, 256, 257, 1000, 1057} {
		toks := seq(n)
		ws, err := Windows(toks, WindowOptions{Method: MethodHFStrided, Ctx: 256, Stride: 64})
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, n)
		for _, w := range ws {
			for p := w.First; p < len(w.Tokens); p++ {
				seen[w.Tokens[p]]++
			}
		}
		for i, c := range seen {
			if want := min(i, 1); c != want {
				t.Fatalf("n=%d: token %d scored %d times", n, i, c)
			}
		}
	}
}

func TestWindowsErrors(t *testing.T) {
	tests := []struct {
		n    int
		o    WindowOptions
		want string
	}{
		{2048, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512}, "ctx 2048 needs more than 2048 tokens, but the token stream has"},
		{4000, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 0}, "stride 0"},
		{4000, WindowOptions{Method: MethodCompareQ, Ctx: 2048, Stride: 512, Rows: 5}, "rows 5 is beyond the token stream: 4000 tokens give only 4 compare_q windows"},
		{1000, WindowOptions{Method: MethodLlamaCpp, Ctx: 512}, "at least 2*ctx = 1024"},
		{5000, WindowOptions{Method: MethodLlamaCpp, Ctx: 512, Rows: 10}, "rows 10 is beyond"},
		{5000, WindowOptions{Method: MethodHFStrided, Ctx: 512, Stride: 513}, "stride 513 is larger than ctx 512"},
		{5000, WindowOptions{Method: MethodHFStrided, Ctx: 512, Stride: 512, Rows: 11}, "rows 11 is beyond"},
		{5000, WindowOptions{Method: MethodCompareQ, Ctx: 1, Stride: 1}, "ctx 1"},
		{5000, WindowOptions{Method: "x", Ctx: 8, Stride: 1}, `unknown method "x"`},
	}
	for _, tc := range tests {
		_, err := Windows(seq(tc.n), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestLMEvalWindows(t *testing.T) {
	const P = -5
	docs := []Document{{Tokens: seq(11)}, {}, {Tokens: seq(3)}, {Tokens: seq(4)}}
	ws, docOf, err := LMEvalWindows(docs, 4, P, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		toks  []int32
		first int
		doc   int
	}{
		{[]int32{P, 0, 1, 2, 3}, 1, 0},
		{[]int32{3, 4, 5, 6, 7}, 1, 0},  // one context token
		{[]int32{6, 7, 8, 9, 10}, 2, 0}, // final partial block: input 6..9
		{[]int32{P, 0, 1, 2}, 1, 2},
		{[]int32{P, 0, 1, 2, 3}, 1, 3},
	}
	if len(ws) != len(want) {
		t.Fatalf("%d windows, want %d", len(ws), len(want))
	}
	for i, w := range want {
		if !equalI32(ws[i].Tokens, w.toks) || ws[i].First != w.first || docOf[i] != w.doc || ws[i].Index != i {
			t.Errorf("window %d = %v First %d doc %d; want %v %d %d", i, ws[i].Tokens, ws[i].First, docOf[i], w.toks, w.first, w.doc)
		}
		if len(ws[i].Tokens)-1 > 4 {
			t.Errorf("window %d: model input %d > ctx", i, len(ws[i].Tokens)-1)
		}
	}
	if got := ScoredTokens(ws); got != 11+3+4 {
		t.Errorf("scored %d, want 18", got)
	}
	if _, _, err := LMEvalWindows(docs, 4, P, 5); err == nil {
		t.Error("rows beyond documents accepted")
	}
}

func equalI32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var _ = backends.Window{}
