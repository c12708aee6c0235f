package eval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qppl/qppl/checkpoint"
	"github.com/qppl/qppl/compare"
	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/reference"
	"github.com/qppl/qppl/tokenizer"
)

// fixtureModel writes the small llama fixture (with its tokenizer.json)
// and returns its directory.
func fixtureModel(t *testing.T) string {
	t.Helper()
	o, err := fixtures.Defaults("llama")
	if err != nil {
		t.Fatal(err)
	}
	o.Hidden, o.Intermediate, o.Layers = 32, 64, 1
	dir := filepath.Join(t.TempDir(), "m")
	if err := fixtures.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// llama.cpp's reading of a text file (one trailing newline dropped) is one
// rule of Prepare, whatever the source kind and the row join.
func TestPrepareLlamaCppTrim(t *testing.T) {
	model := fixtureModel(t)
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("the cat sat on the mat. ", 30)
	text := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(text, []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := tok.Encode(body, true)
	if reflect.DeepEqual(want, tok.Encode(body+"\n", true)) {
		t.Fatal("the tokenizer drops the newline itself: the test could not see the trim")
	}
	for _, src := range []Source{{Text: text}, {DataFile: text}, {DataFile: text, Join: "compare_q"}, {DataFile: text, Join: "filtered"}} {
		d, err := Prepare(context.Background(), PrepareOptions{Source: src, Tokenizer: model, Model: Vocabulary{BOS: -1, EOS: -1},
			Method: compare.MethodLlamaCpp, Ctx: 16})
		if err != nil {
			t.Fatalf("%+v: %v", src, err)
		}
		if !reflect.DeepEqual(d.Tokens, want) {
			t.Errorf("%+v: %d tokens, want the %d of the text without its trailing newline", src, len(d.Tokens), len(want))
		}
	}
	// Other methods read the text as is.
	d, err := Prepare(context.Background(), PrepareOptions{Source: Source{Text: text}, Tokenizer: model, Model: Vocabulary{BOS: -1, EOS: -1},
		Method: compare.MethodCompareQ, Ctx: 16, Stride: 16})
	if err != nil || !reflect.DeepEqual(d.Tokens, tok.Encode(body+"\n", true)) {
		t.Errorf("compare_q: the trailing newline must stay (err %v)", err)
	}
}

// The llamacpp chunk BOS: the tokenizer's, else config.json's bos_token_id
// (a token file with no tokenizer next to it), else none.
func TestPrepareBOS(t *testing.T) {
	model := fixtureModel(t)
	tok, _ := tokenizer.Load(model)
	tokBOS, ok := tok.BOS()
	if !ok {
		t.Fatal("fixture tokenizer has no BOS")
	}
	ids := make([]int32, 64)
	for i := range ids {
		ids[i] = int32(10 + i%50)
	}
	tokens := filepath.Join(t.TempDir(), "t.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	noTok := t.TempDir()
	for _, c := range []struct {
		tokenizer string
		model     Vocabulary
		want      int32
	}{
		{model, Vocabulary{Size: 512, BOS: 7, EOS: -1}, tokBOS},
		{noTok, Vocabulary{Size: 512, BOS: 7, EOS: -1}, 7},
		{"", Vocabulary{Size: 512, BOS: 7, EOS: -1}, 7},
		{noTok, Vocabulary{Size: 512, BOS: -1, EOS: -1}, -1}, // chunks keep their first token
	} {
		d, err := Prepare(context.Background(), PrepareOptions{Source: Source{Tokens: tokens}, Tokenizer: c.tokenizer, Model: c.model,
			Method: compare.MethodLlamaCpp, Ctx: 16, Rows: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range d.Windows {
			want := c.want
			if want < 0 {
				want = ids[w.Index*16]
			}
			if w.Tokens[0] != want || w.Tokens[1] != ids[w.Index*16+1] {
				t.Errorf("tokenizer %q, config BOS %d: window %d starts %v, want first %d", c.tokenizer, c.model.BOS, w.Index, w.Tokens[:2], want)
			}
		}
	}
}

func TestPrepareErrors(t *testing.T) {
	model := fixtureModel(t)
	tokens := filepath.Join(t.TempDir(), "t.i32")
	if err := dataset.WriteTokens(tokens, []int32{1, 2, 600, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "s.i32")
	if err := dataset.WriteTokens(short, make([]int32, 40)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		o    PrepareOptions
		data bool // a *DataError
		want string
	}{
		{"id beyond vocabulary", PrepareOptions{Source: Source{Tokens: tokens}, Model: Vocabulary{Size: 512, BOS: -1, EOS: -1}, Method: compare.MethodCompareQ, Ctx: 2, Stride: 1},
			true, tokens + ": token 600 (position 2) is outside the model's vocabulary [0, 512)"},
		{"no tokenizer for text", PrepareOptions{Source: Source{Text: tokens}, Tokenizer: t.TempDir(), Method: compare.MethodCompareQ, Ctx: 2},
			true, "has no tokenizer.json to tokenize the text with"},
		{"tokenizer of another model", PrepareOptions{Source: Source{Tokens: short}, Tokenizer: model, Model: Vocabulary{Size: 100, BOS: -1, EOS: -1}, Method: compare.MethodCompareQ, Ctx: 4, Stride: 4},
			true, "tokenizer.json has 512 token ids but config.json's vocab_size is 100"},
		{"rows beyond the stream", PrepareOptions{Source: Source{Tokens: short}, Model: Vocabulary{BOS: -1, EOS: -1}, Method: compare.MethodCompareQ, Ctx: 16, Stride: 16, Rows: 5},
			false, "rows 5 is beyond the token stream: 40 tokens give only 2 compare_q windows of ctx 16 stride 16"},
	}
	for _, c := range cases {
		_, err := Prepare(context.Background(), c.o)
		var de *DataError
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &de) != c.data {
			t.Errorf("%s: %v (data error %v), want %q (data error %v)", c.name, err, errors.As(err, &de), c.want, c.data)
		}
	}
	// compare_q's max_rows: all windows, with a warning.
	d, err := Prepare(context.Background(), PrepareOptions{Source: Source{Tokens: short}, Model: Vocabulary{BOS: -1, EOS: -1},
		Method: compare.MethodCompareQ, Ctx: 16, Stride: 16, Rows: 5, AllRowsWhenShort: true})
	if err != nil || len(d.Windows) != 2 || len(d.Warnings) != 1 || d.Spec.Rows != 5 {
		t.Errorf("rows beyond, compare_q style: %v windows %d warnings %q", err, len(d.Windows), d.Warnings)
	}
}

// Evaluate over two shards, merged, reduces to exactly the result of one
// whole run (timing apart), and a run resumed from a complete journal
// evaluates nothing and writes the same result.
func TestEvaluateShardsAndResume(t *testing.T) {
	model := fixtureModel(t)
	m, err := checkpoint.OpenDir(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	be, err := reference.New(m, reference.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ids := make([]int32, 200)
	for i := range ids {
		ids[i] = int32((i*i*7 + 3*i + 1) % 512)
	}
	tokens := filepath.Join(t.TempDir(), "t.i32")
	if err := dataset.WriteTokens(tokens, ids); err != nil {
		t.Fatal(err)
	}
	d, err := Prepare(context.Background(), PrepareOptions{Source: Source{Tokens: tokens}, Model: Vocabulary{Size: 512, BOS: -1, EOS: -1},
		Method: compare.MethodCompareQ, Ctx: 24, Stride: 20, Rows: 5})
	if err != nil {
		t.Fatal(err)
	}
	ident := func(shard string) *Identity {
		return &Identity{Version: IdentityVersion, Command: "eval", Model: model, Backend: "reference", Precision: "fp64",
			Data: d.Spec, DataSpecHash: d.Hash, Windows: len(d.Windows), KLMode: "scored", TopK: 5, Bootstrap: 50, Seed: 3, Shard: shard}
	}
	whole, err := Evaluate(context.Background(), be, Options{Windows: d.Windows, Identity: ident("")})
	if err != nil {
		t.Fatal(err)
	}
	want := whole.Result
	if want.Timing == nil || whole.Fresh != 5 {
		t.Fatalf("whole run: timing %v, %d windows scored", want.Timing, whole.Fresh)
	}
	want.Timing = nil

	root := t.TempDir()
	var dirs []string
	for i := range 2 {
		dir := filepath.Join(root, "s", string(rune('0'+i)))
		id := ident([]string{"0/2", "1/2"}[i])
		rd, err := OpenRunDir(dir, id, d.Windows)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Evaluate(context.Background(), be, Options{Windows: d.Windows, Identity: id, Shard: compare.Shard{I: i, N: 2}, RunDir: rd})
		rd.Close()
		if err != nil || out.Fresh != []int{3, 2}[i] {
			t.Fatalf("shard %d: %v, %v windows", i, err, out)
		}
		dirs = append(dirs, dir)
	}
	id, ws, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := Reduce(ws, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(merged, want) {
		t.Errorf("merged shards:\n%+v\nwhole run:\n%+v", merged, want)
	}

	dir := filepath.Join(root, "whole")
	for pass := range 2 {
		rd, err := OpenRunDir(dir, ident(""), d.Windows)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Evaluate(context.Background(), be, Options{Windows: d.Windows, Identity: ident(""), RunDir: rd})
		rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		if wantFresh := []int{5, 0}[pass]; out.Fresh != wantFresh {
			t.Errorf("pass %d scored %d windows, want %d", pass, out.Fresh, wantFresh)
		}
		out.Result.Timing = nil
		if !reflect.DeepEqual(out.Result, want) {
			t.Errorf("pass %d: result differs from the whole run", pass)
		}
	}
	// Another identity is refused, naming the field.
	other := ident("")
	other.TopK = 3
	if _, err := OpenRunDir(dir, other, d.Windows); err == nil || !IsInput(err) || !strings.Contains(err.Error(), "top_k: 5 in the journal, 3 now") {
		t.Errorf("other identity: %v", err)
	}
	// A cancelled context reports what was saved.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Evaluate(ctx, be, Options{Windows: d.Windows, Identity: ident("")})
	var in *Interrupted
	// Go's "context canceled" never reaches the user; errors.Is still sees it.
	if !errors.As(err, &in) || in.Done != 0 || in.Total != 5 || !strings.Contains(err.Error(), "nothing was saved") ||
		strings.Contains(err.Error(), "context canceled") || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
