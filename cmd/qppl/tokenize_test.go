package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qppl/qppl/dataset"
	"github.com/qppl/qppl/fixtures"
)

// tokenizeFixture writes the fixture tokenizer.json into a model directory.
func tokenizeFixture(t *testing.T) (dir string, ft *fixtures.Tokenizer) {
	t.Helper()
	dir = t.TempDir()
	ft = fixtures.NewTokenizer(512)
	js, err := ft.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ft
}

func TestTokenizeEncodeDecode(t *testing.T) {
	dir, ft := tokenizeFixture(t)
	text := "The quick brown fox.\n\n It's 2024!"
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, special := range []bool{false, true} {
		out := filepath.Join(dir, "out.i32")
		args := []string{"tokenize", "--tokenizer", dir, "--text", in, "--out", out}
		if special {
			args = append(args, "--special")
		}
		if code, _, stderr := runQPPL(t, args...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		ids, err := dataset.ReadTokens(out)
		if err != nil {
			t.Fatal(err)
		}
		want := ft.Encode(text, special)
		got := make([]int, len(ids))
		for i, id := range ids {
			got[i] = int(id)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("special=%v: ids %v, fixture %v", special, got, want)
		}
		code, stdout, stderr := runQPPL(t, "tokenize", "--decode", "--skip-special", "--tokenizer", filepath.Join(dir, "tokenizer.json"), "--tokens", out)
		if code != 0 || stdout != text {
			t.Fatalf("decode: exit %d, stdout %q, stderr %s", code, stdout, stderr)
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	dir, _ := tokenizeFixture(t)
	good := filepath.Join(dir, "in.txt")
	bad := filepath.Join(dir, "bad.txt")
	oov := filepath.Join(dir, "oov.i32")
	odd := filepath.Join(dir, "odd.i32")
	out := filepath.Join(dir, "out.i32")
	os.WriteFile(good, []byte("hello"), 0o644)
	os.WriteFile(bad, []byte("ok\xffno"), 0o644)
	os.WriteFile(odd, []byte{1, 2, 3}, 0o644)
	if err := dataset.WriteTokens(oov, []int32{1, 1 << 20}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"NoTokenizer", []string{"--text", good, "--out", out}, "--tokenizer FILE_OR_MODEL_DIR is required"},
		{"NoOut", []string{"--tokenizer", dir, "--text", good}, "--text FILE and --out FILE.i32 are required"},
		{"DecodeNoTokens", []string{"--decode", "--tokenizer", dir}, "--tokens FILE.i32 is required"},
		{"DecodeWithText", []string{"--decode", "--tokenizer", dir, "--tokens", oov, "--text", good}, "only apply to encoding"},
		{"MissingTokenizer", []string{"--tokenizer", filepath.Join(dir, "nope"), "--text", good, "--out", out}, "nope"},
		{"InvalidUTF8", []string{"--tokenizer", dir, "--text", bad, "--out", out}, "invalid UTF-8 at byte offset 2"},
		{"TokenOutOfVocab", []string{"--decode", "--tokenizer", dir, "--tokens", oov}, "token 1048576 (index 1) is not in the tokenizer's vocabulary"},
		{"OddTokenFile", []string{"--decode", "--tokenizer", dir, "--tokens", odd}, "not a multiple of 4"},
		{"StrayArg", []string{"--tokenizer", dir, "--text", good, "--out", out, "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runQPPL(t, append([]string{"tokenize"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, exitUsage, tc.msg)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("output file written despite the error")
			}
		})
	}
}

// TestTokenizeGolden: the CLI output file is byte-identical to the golden
// token file made with the HF tokenizers library.
func TestTokenizeGolden(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared")
	text := filepath.Join(shared, "data", "wikitext-2-raw-v1", "test.joined.txt")
	golden := filepath.Join(shared, "golden", "tokens", "llama3.test-joined.special1.i32")
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Skipf("shared golden not found: %v", err)
	}
	out := filepath.Join(t.TempDir(), "llama3.i32")
	code, _, stderr := runQPPL(t, "tokenize", "--tokenizer", filepath.Join(shared, "tokenizers", "llama3"), "--text", text, "--special", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from %s (%d vs %d bytes)", out, golden, len(got), len(want))
	}
}
