package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func sharedWT2(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "data", "wikitext-2-raw-v1", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data not found: %v", err)
	}
	return p
}

func TestTokensRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, ids := range [][]int32{nil, {0}, {1, -1, math.MaxInt32, math.MinInt32, 128000, 2}} {
		p := filepath.Join(dir, "t.i32")
		if err := WriteTokens(p, ids); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(p)
		if st.Size() != int64(4*len(ids)) {
			t.Fatalf("size %d, want %d", st.Size(), 4*len(ids))
		}
		got, err := ReadTokens(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ids) {
			t.Fatalf("got %d ids, want %d", len(got), len(ids))
		}
		for i := range ids {
			if got[i] != ids[i] {
				t.Fatalf("id %d: got %d want %d", i, got[i], ids[i])
			}
		}
	}
	// Byte layout is little-endian.
	p := filepath.Join(dir, "le.i32")
	if err := WriteTokens(p, []int32{0x01020304, -2}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if hex.EncodeToString(b) != "04030201feffffff" {
		t.Fatalf("bytes %x", b)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

func TestReadTokensErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.i32")
	os.WriteFile(bad, []byte{1, 2, 3, 4, 5, 6}, 0o644)
	_, err := ReadTokens(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "multiple of 4") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ReadTokens(filepath.Join(dir, "missing.i32")); err == nil || !strings.Contains(err.Error(), "missing.i32") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ReadTokens(dir); err == nil {
		t.Fatal("directory accepted")
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestSharedJoins(t *testing.T) {
	rowsPath := sharedWT2(t, "test.rows.jsonl")
	joined, err := os.ReadFile(sharedWT2(t, "test.joined.txt"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(sharedWT2(t, "wiki.test.raw"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(rowsPath, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindJSONL || len(c.Rows) != 4358 {
		t.Fatalf("kind %s, %d rows; want jsonl, 4358", c.Kind, len(c.Rows))
	}
	empty := 0
	for _, r := range c.Rows {
		if r == "" {
			empty++
		}
	}
	if empty != 1467 {
		t.Fatalf("%d empty rows, want 1467", empty)
	}
	cq, _ := c.Text(JoinCompareQ)
	if cq != string(joined) {
		t.Fatal("compare_q join differs from test.joined.txt")
	}
	if n := utf8.RuneCountInString(cq); n != 1294336 || len(cq) != 1296370 {
		t.Fatalf("compare_q: %d chars %d bytes", n, len(cq))
	}
	def, _ := c.Text("")
	if def != cq {
		t.Fatal("default mode is not compare_q")
	}
	f, _ := c.Text(JoinFiltered)
	// methodology.md: 1,291,402 chars; bytes and sha256 from Python's
	// "\n\n".join(t for t in rows if t.strip()).
	if n := utf8.RuneCountInString(f); n != 1291402 || len(f) != 1293436 {
		t.Fatalf("filtered: %d chars %d bytes", n, len(f))
	}
	if sha(f) != "c5b5caea5bd655cb221545a484f2f0f59d35092a17a66840d7b9513d0b99687d" {
		t.Fatal("filtered join sha256 differs")
	}
	if RawFromRows(c.Rows) != string(raw) {
		t.Fatal(`"".join(row or " \n") differs from wiki.test.raw`)
	}
	lc, _ := c.Text(JoinLlamaCpp)
	if lc != string(raw[:len(raw)-1]) || len(lc) != 1290589 {
		t.Fatal("llamacpp text is not wiki.test.raw minus its trailing newline")
	}

	// wiki.test.raw gives back the same rows, hence every join.
	rc, err := Load(sharedWT2(t, "wiki.test.raw"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Kind != KindRaw || len(rc.Rows) != len(c.Rows) {
		t.Fatalf("raw: kind %s, %d rows", rc.Kind, len(rc.Rows))
	}
	for i := range c.Rows {
		if rc.Rows[i] != c.Rows[i] {
			t.Fatalf("row %d differs: %q vs %q", i, rc.Rows[i], c.Rows[i])
		}
	}
	for _, m := range JoinModes() {
		a, _ := c.Text(m)
		b, _ := rc.Text(m)
		if a != b {
			t.Fatalf("mode %s differs between jsonl and wiki.test.raw", m)
		}
	}

	// A plain text file is used as is.
	tc, err := Load(sharedWT2(t, "test.joined.txt"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tc.Kind != KindText {
		t.Fatalf("kind %s", tc.Kind)
	}
	if s, _ := tc.Text(JoinCompareQ); s != string(joined) {
		t.Fatal("text file not used as is")
	}
}

func TestJoinsHandMade(t *testing.T) {
	rows := []string{"", " = A = \n", "", " x y \n", "\u3000\n", " \n"}
	tests := []struct {
		mode JoinMode
		want string
	}{
		{JoinCompareQ, "\n\n = A = \n\n\n\n\n x y \n\n\n\u3000\n\n\n \n"},
		{JoinFiltered, " = A = \n\n\n x y \n"},
		{JoinLlamaCpp, " \n = A = \n \n x y \n\u3000\n "},
	}
	c := &Corpus{Kind: KindJSONL, Rows: rows}
	for _, tt := range tests {
		got, err := c.Text(tt.mode)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.mode, got, err, tt.want)
		}
	}
	if _, err := c.Text("bogus"); err == nil {
		t.Error("bogus mode accepted")
	}
	tc := &Corpus{Kind: KindText, Raw: "a\n\n"}
	for mode, want := range map[JoinMode]string{JoinCompareQ: "a\n\n", JoinFiltered: "a\n\n", JoinLlamaCpp: "a\n"} {
		if got, _ := tc.Text(mode); got != want {
			t.Errorf("text %s: %q want %q", mode, got, want)
		}
	}
	for in, want := range map[string]JoinMode{"": JoinCompareQ, "compare_q": JoinCompareQ, "filtered": JoinFiltered, "llamacpp": JoinLlamaCpp, "llama.cpp": JoinLlamaCpp} {
		got, err := ParseJoinMode(in)
		if err != nil || got != want {
			t.Errorf("ParseJoinMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseJoinMode("nope"); err == nil || !strings.Contains(err.Error(), "compare_q, filtered or llamacpp") {
		t.Errorf("err = %v", err)
	}
}

func TestRowsFromRaw(t *testing.T) {
	tests := []struct {
		raw  string
		rows []string
	}{
		{"", []string{}},
		{" \n", []string{""}},
		{" \n = T = \n \n a\n", []string{"", " = T = \n", "", " a\n"}},
		{"a\nb", []string{"a\n", "b"}},
		{"\t\x1c\n", []string{""}}, // Python's strip() treats U+001C as whitespace
	}
	for _, tt := range tests {
		got := RowsFromRaw(tt.raw)
		if strings.Join(got, "|") != strings.Join(tt.rows, "|") || len(got) != len(tt.rows) {
			t.Errorf("RowsFromRaw(%q) = %q, want %q", tt.raw, got, tt.rows)
		}
	}
}

func TestPyWhitespace(t *testing.T) {
	blank := []string{"", " ", "\t\n\v\f\r", "\x1c\x1d\x1e\x1f", "\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"}
	for _, s := range blank {
		if !isBlank(s) {
			t.Errorf("isBlank(%q) = false", s)
		}
	}
	notBlank := []string{"a", " \u200b ", "\u180e", "\ufeff", " x "}
	for _, s := range notBlank {
		if isBlank(s) {
			t.Errorf("isBlank(%q) = true", s)
		}
	}
	// len(re.split(r"\s+", s)), computed with Python 3.11.
	counts := []struct {
		s string
		n int
	}{
		{"", 1}, {" ", 2}, {"a", 1}, {"a b", 2}, {" a  b ", 4}, {"a\u00a0b\u3000c", 3},
		{" = T = \n \n x", 5}, {"a\x1fb", 2}, {"a\u200bb", 1},
	}
	for _, tt := range counts {
		if got := pySplitWhitespaceCount(tt.s); got != tt.n {
			t.Errorf("count(%q) = %d, want %d", tt.s, got, tt.n)
		}
	}
	if got := pyStrip("\u3000 x\u00a0 \x1c"); got != "x" {
		t.Errorf("pyStrip = %q", got)
	}
}

func TestDetectKind(t *testing.T) {
	tests := []struct {
		name, head string
		want       Kind
	}{
		{"a.jsonl", "", KindJSONL},
		{"a.JSON", "", KindJSONL},
		{"a.parquet", "", KindParquet},
		{"test-00000-of-00001", "PAR1xxxx", KindParquet},
		{"wiki.test.raw", " \n", KindRaw},
		{"rows", "{\"text\": \"\"}\n{\"text\": \"a\"}", KindJSONL},
		{"rows", "  {\"text\": \"a\"}", KindJSONL},
		{"doc.txt", "{\"title\": \"a\"}", KindText},
		{"doc.txt", "{not json", KindText},
		{"doc.txt", "hello", KindText},
	}
	for _, tt := range tests {
		if got := DetectKind(tt.name, []byte(tt.head)); got != tt.want {
			t.Errorf("DetectKind(%q, %q) = %q, want %q", tt.name, tt.head, got, tt.want)
		}
	}
	for in, want := range map[string]Kind{"": KindAuto, "jsonl": KindJSONL, "parquet": KindParquet, "wiki.test.raw": KindRaw, "text": KindText} {
		if got, err := ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseKind("csv"); err == nil {
		t.Error("csv accepted")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, content string
		opts          LoadOptions
		want          []string // substrings of the error
	}{
		{"a.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"\n", LoadOptions{}, []string{"a.jsonl:2", "not a JSON object"}},
		{"b.jsonl", "{\"text\": \"ok\"}\n\n[1,2]\n", LoadOptions{}, []string{"b.jsonl:3"}},
		{"c.jsonl", "{\"txt\": \"ok\"}\n", LoadOptions{}, []string{"c.jsonl:1", `no "text" field`}},
		{"d.jsonl", "{\"text\": 3}\n", LoadOptions{}, []string{"d.jsonl:1", "not a string"}},
		{"e.jsonl", "{\"text\": null}\n", LoadOptions{}, []string{"e.jsonl:1", "not a string"}},
		{"f.jsonl", "{\"text\": \"a\"}\n{\"text\": \"\xff\"}\n", LoadOptions{}, []string{"f.jsonl:2", "invalid UTF-8 at byte offset 24"}},
		{"g.txt", "abc\xc3(", LoadOptions{}, []string{"g.txt", "invalid UTF-8 at byte offset 3"}},
		{"h.raw", "ok\n\xe2\x82", LoadOptions{}, []string{"h.raw", "invalid UTF-8 at byte offset 3"}},
		{"i.jsonl", "{\"body\": \"a\"}\n", LoadOptions{Column: "text"}, []string{`no "text" field`}},
		{"j.txt", "x", LoadOptions{Kind: KindParquet}, []string{"j.txt", "parquet"}},
	}
	for _, tt := range tests {
		p := write(tt.name, tt.content)
		_, err := Load(p, tt.opts)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
	if _, err := Load(filepath.Join(dir, "none.jsonl"), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "none.jsonl") {
		t.Errorf("missing file: %v", err)
	}
	// A custom column and blank lines are fine.
	p := write("k.jsonl", "{\"body\": \"a\\n\"}\n\n{\"body\": \"\\u00e9\"}\n")
	c, err := Load(p, LoadOptions{Column: "body"})
	if err != nil || len(c.Rows) != 2 || c.Rows[0] != "a\n" || c.Rows[1] != "é" {
		t.Fatalf("custom column: %q, %v", c, err)
	}
}

func TestJSONLSurrogates(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want string
	}{
		{`{"text": "\ud83d\ude00"}`, true, "\U0001F600"},
		{`{"text": "\uD83D\uDE00 x"}`, true, "\U0001F600 x"},
		{`{"text": "\ufffd"}`, true, "\ufffd"},
		{`{"text": "` + "\ufffd" + `"}`, true, "\ufffd"},
		{`{"text": "\\ud800"}`, true, `\ud800`}, // an escaped backslash, not an escape
		{`{"text": "\ud800"}`, false, ""},
		{`{"text": "\ud800x"}`, false, ""},
		{`{"text": "\ude00"}`, false, ""},
		{`{"text": "\ud83d\u0041"}`, false, ""},
	}
	for _, tt := range tests {
		rows, err := ParseJSONL("s.jsonl", []byte(tt.line), "text")
		if tt.ok != (err == nil) {
			t.Errorf("%s: err = %v", tt.line, err)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "s.jsonl:1") || !strings.Contains(err.Error(), "surrogate") {
				t.Errorf("%s: err = %v", tt.line, err)
			}
			continue
		}
		if len(rows) != 1 || rows[0] != tt.want {
			t.Errorf("%s: rows %q, want %q", tt.line, rows, tt.want)
		}
	}
}

func TestLoadAllRaw(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.raw"), filepath.Join(dir, "b.raw")
	os.WriteFile(a, []byte(" \n = A = \n"), 0o644)
	os.WriteFile(b, []byte(" b\n"), 0o644)
	c, err := LoadAll([]string{a, b}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Rows, "|") != "| = A = \n| b\n" {
		t.Errorf("rows %q", c.Rows)
	}
	if s, _ := c.Text(JoinLlamaCpp); s != " \n = A = \n b" {
		t.Errorf("llamacpp %q", s)
	}
	if s, _ := c.Text(JoinCompareQ); s != "\n\n = A = \n\n\n b\n" {
		t.Errorf("compare_q %q", s)
	}
}
