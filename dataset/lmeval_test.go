package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// Expected outputs were computed with lm-eval's wikitext_detokenizer under
// Python 3.11 (one case per rule, plus interactions).
func TestWikitextDetokenize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"the boys ' toys", "the boys' toys"},                     // s ' → s'
		{"a /' 5/ b", "a /'[0-9]/ b"},                             // the literal replacement of re.sub(r"/' [0-9]/", r"/'[0-9]/")
		{"a /' x/ b", "a /' x/ b"},                                // no digit: untouched
		{"1 @-@ 2 , 3 @,@ 000 and 4 @.@ 5", "1-2, 3,000 and 4.5"}, // number separators
		{"a : b ; c . d ! e ? f , g", "a: b; c. d! e? f, g"},      // punctuation
		{"a :b", "a :b"},                                          // only " : " with both spaces
		{"( a b )", "(a b)"},                                      // parentheses
		{"(  \u00a0x )", "(x)"},                                   // \s is Unicode whitespace (NBSP)
		{"( a ( b ) c )", "(a ( b) c )"},                          // lazy, leftmost, non-overlapping
		{"[ x ] { y }", "[x] {y}"},                                // brackets and braces
		{`" quoted words "`, `"quoted words"`},                    // double quotes
		{`" a " b " c "`, `"a" b "c"`},                            // pairs left to right
		{"' single '", "'single'"},                                // single quotes
		{"= = = = H = = = =", "==== H ===="},                      // headings
		{"= = = H = = =", "=== H ==="},                            //
		{"= = H = =", "== H =="},                                  //
		{"30 \u00b0 C", "30\u00b0C"},                              // degree sign
		{"line \n next", "line\nnext"},                            // spaces around newlines
		{"( a\nb )", "(a\nb)"},                                    // [^\)] matches newlines
		{"a N b", "a 1 b"},                                        // N → 1
		{"John 's", "John's"},                                     // 's
		{"@-@", "@-@"},                                            // needs the spaces
		{"it 's the dogs ' ( toy )", "it's the dogs' (toy)"},      // several rules
		{" = = Career = = \n \n He said \" hi \" .", " == Career ==\n\nHe said \"hi\" ."}, // a real-looking page
	}
	for _, tt := range tests {
		if got := WikitextDetokenize(tt.in); got != tt.want {
			t.Errorf("WikitextDetokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDocumentsHandMade(t *testing.T) {
	rows := []string{
		"", " = First = \n", "", " Body one @-@ two .\n", "",
		" = = Section = = \n", "", " More .\n", "",
		" = Second = \n", "", " Tail\n", "",
	}
	docs := Documents(rows)
	want := []struct {
		page  string
		words int
	}{
		// (Checked with Python 3.11.) The leading " " line is blank and is dropped; headings of level 2
		// stay inside the page.
		{" = First = \n \n Body one @-@ two .\n \n = = Section = = \n \n More .\n ", 17},
		{" = Second = \n \n Tail\n \n", 6},
	}
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want %d: %+v", len(docs), len(want), docs)
	}
	for i, w := range want {
		d := docs[i]
		if d.Page != w.page {
			t.Errorf("doc %d page %q, want %q", i, d.Page, w.page)
		}
		if d.Words != w.words || d.Bytes != len(w.page) {
			t.Errorf("doc %d: words %d bytes %d, want %d %d", i, d.Words, d.Bytes, w.words, len(w.page))
		}
		if d.Detokenized != WikitextDetokenize(w.page) {
			t.Errorf("doc %d detokenized %q", i, d.Detokenized)
		}
	}
	if docs[0].Detokenized != " = First =\n\nBody one-two .\n\n== Section ==\n\nMore .\n" {
		t.Errorf("detokenized %q", docs[0].Detokenized)
	}
	// No heading at all: a single page with everything; an empty input gives
	// one empty page, as the dataset script yields the final page always.
	if d := DocumentsFromRaw("a b\nc\n"); len(d) != 1 || d[0].Page != "a b\nc\n" || d[0].Words != 4 {
		t.Errorf("no heading: %+v", d)
	}
	if d := DocumentsFromRaw(""); len(d) != 1 || d[0].Page != "" || d[0].Words != 1 || d[0].Bytes != 0 {
		t.Errorf("empty: %+v", d)
	}
}

// Goldens from Python 3.11 running the document split of
// EleutherAI/wikitext_document_level, lm-eval's wikitext_detokenizer and its
// process_results counts over data/wikitext-2-raw-v1 (62 test documents, as
// lm-eval reports for wikitext).
func TestDocumentsShared(t *testing.T) {
	c, err := Load(sharedWT2(t, "test.rows.jsonl"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	docs := c.Documents()
	if len(docs) != 62 {
		t.Fatalf("%d documents, want 62", len(docs))
	}
	words, bytes := 0, 0
	hp, hd := sha256.New(), sha256.New()
	for _, d := range docs {
		words += d.Words
		bytes += d.Bytes
		hp.Write([]byte(d.Page))
		hp.Write([]byte{0})
		hd.Write([]byte(d.Detokenized))
		hd.Write([]byte{0})
	}
	if words != 241335 || bytes != 1290527 {
		t.Errorf("words %d bytes %d, want 241335 1290527", words, bytes)
	}
	if got := hex.EncodeToString(hp.Sum(nil)); got != "f05c9737489cb4b20eec706aee92a73b6861dcc743bc252ffa64b207d0aa5a03" {
		t.Errorf("pages sha256 %s", got)
	}
	if got := hex.EncodeToString(hd.Sum(nil)); got != "da61ba76b9daa5d5964a4e797206bb65bee7dd401fdbc16a83072f8cb94e08db" {
		t.Errorf("detokenized sha256 %s", got)
	}
	if docs[0].Words != 1093 || docs[1].Words != 4751 || docs[2].Words != 2434 {
		t.Errorf("first word counts %d %d %d", docs[0].Words, docs[1].Words, docs[2].Words)
	}
	// The same documents come from wiki.test.raw.
	rc, err := Load(sharedWT2(t, "wiki.test.raw"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range rc.Documents() {
		if d != docs[i] {
			t.Fatalf("document %d differs between wiki.test.raw and the rows", i)
		}
	}
}
