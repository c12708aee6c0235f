package tokenizer_test

import (
	"testing"

	"github.com/qppl/qppl/fixtures"
	"github.com/qppl/qppl/tokenizer"
)

// TestFixtureTokenizer cross-checks the loader against the fixture
// package's own byte-level BPE encoder (an independent implementation) on
// the tokenizer.json it writes.
func TestFixtureTokenizer(t *testing.T) {
	ft := fixtures.NewTokenizer(512)
	js, err := ft.JSON()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ft.ConfigJSON(256)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromJSON(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != ft.Size() {
		t.Errorf("VocabSize %d, fixture %d", tk.VocabSize(), ft.Size())
	}
	if bos, ok := tk.BOS(); !ok || int(bos) != ft.BOS() {
		t.Errorf("BOS() = %d, %v; fixture %d", bos, ok, ft.BOS())
	}
	text := fixtures.DemoText()
	for _, s := range []string{text, "Hello  world!\n\n 12345 it's", "", " é😀"} {
		for _, special := range []bool{false, true} {
			got := tk.Encode(s, special)
			want := ft.Encode(s, special)
			if len(got) != len(want) {
				t.Fatalf("%.40q special=%v: %d ids, fixture %d", s, special, len(got), len(want))
			}
			for i := range got {
				if int(got[i]) != want[i] {
					t.Fatalf("%.40q special=%v: id %d is %d, fixture %d", s, special, i, got[i], want[i])
				}
			}
		}
		if dec := tk.Decode(tk.Encode(s, true), true); dec != s {
			t.Errorf("round trip of %.40q gave %.40q", s, dec)
		}
	}
}
