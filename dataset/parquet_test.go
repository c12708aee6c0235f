package dataset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type textRow struct {
	Text string `parquet:"text"`
}

type optRow struct {
	Text *string `parquet:"text,optional"`
}

type twoCols struct {
	ID   int64  `parquet:"id"`
	Text string `parquet:"text"`
}

func writeParquet[T any](t *testing.T, path string, rows []T, opts ...parquet.WriterOption) {
	t.Helper()
	if err := parquet.WriteFile(path, rows, opts...); err != nil {
		t.Fatal(err)
	}
}

func TestParquetRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := []string{"", " = Robert Boulter = \n", "", " caf\u00e9 \u00b0 \n", strings.Repeat("x", 5000) + "\n"}
	var rows []textRow
	for _, s := range want {
		rows = append(rows, textRow{s})
	}
	check := func(name string, got []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: row %d = %q, want %q", name, i, got[i], want[i])
			}
		}
	}
	// HF's file name, several row groups.
	p := filepath.Join(dir, "test-00000-of-00001.parquet")
	writeParquet(t, p, rows, parquet.MaxRowsPerRowGroup(2))
	c, err := Load(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindParquet {
		t.Fatalf("kind %s", c.Kind)
	}
	check("required", c.Rows)
	if s, _ := c.Text(JoinCompareQ); s != strings.Join(want, "\n\n") {
		t.Fatal("compare_q join of parquet rows")
	}

	// Optional column (as HF writes it), detected by magic without extension.
	var orows []optRow
	for i := range want {
		orows = append(orows, optRow{&want[i]})
	}
	p2 := filepath.Join(dir, "noext")
	writeParquet(t, p2, orows)
	c2, err := Load(p2, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("optional", c2.Rows)

	// Another column present; LoadAll concatenates shards in order.
	p3 := filepath.Join(dir, "two.parquet")
	var trows []twoCols
	for i, s := range want {
		trows = append(trows, twoCols{int64(i), s})
	}
	writeParquet(t, p3, trows)
	all, err := LoadAll([]string{p3, p}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("shard 1", all.Rows[:len(want)])
	check("shard 2", all.Rows[len(want):])
	// Mixed formats and plain text are refused.
	j := filepath.Join(dir, "rows.jsonl")
	os.WriteFile(j, []byte(`{"text": "a"}`), 0o644)
	if _, err := LoadAll([]string{p, j}, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "one format") {
		t.Errorf("mixed formats: %v", err)
	}
	txt := filepath.Join(dir, "a.txt")
	os.WriteFile(txt, []byte("hello"), 0o644)
	if _, err := LoadAll([]string{txt, txt}, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "row-based") {
		t.Errorf("text files: %v", err)
	}
	if _, err := LoadAll(nil, LoadOptions{}); err == nil {
		t.Error("no files accepted")
	}
}

func TestParquetErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	var rows []textRow
	for i := 0; i < 50; i++ {
		rows = append(rows, textRow{strings.Repeat("ab", i)})
	}
	writeParquet(t, good, rows)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}

	// Truncation at every length, and single-byte corruptions, must give an
	// error or (for corruptions the format cannot detect) a result, never a panic.
	// Every length near both ends, a stride through the middle.
	var cuts []int
	for n := 0; n < len(data); n++ {
		if n < 64 || n > len(data)-64 || n%37 == 0 {
			cuts = append(cuts, n)
		}
	}
	for _, n := range cuts {
		p := filepath.Join(dir, "trunc.parquet")
		os.WriteFile(p, data[:n], 0o644)
		if _, err := Load(p, LoadOptions{}); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		} else if !strings.Contains(err.Error(), "trunc.parquet") {
			t.Fatalf("error does not name the file: %v", err)
		}
	}
	for i := 0; i < len(data); i++ {
		if i >= 64 && i < len(data)-256 && i%7 != 0 {
			continue
		}
		b := append([]byte(nil), data...)
		b[i] ^= 0xff
		p := filepath.Join(dir, "flip.parquet")
		os.WriteFile(p, b, 0o644)
		Load(p, LoadOptions{}) // must not panic
	}

	// A footer length beyond the file is rejected before any allocation.
	b := append([]byte(nil), data...)
	b[len(b)-5] = 0x7f
	p0 := filepath.Join(dir, "footer.parquet")
	os.WriteFile(p0, b, 0o644)
	if _, err := Load(p0, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "footer length") {
		t.Errorf("huge footer: %v", err)
	}

	// Wrong column and non-string column.
	if _, err := Load(good, LoadOptions{Column: "body"}); err == nil || !strings.Contains(err.Error(), `no column "body"`) || !strings.Contains(err.Error(), "text") {
		t.Errorf("missing column: %v", err)
	}
	p := filepath.Join(dir, "ints.parquet")
	writeParquet(t, p, []twoCols{{1, "a"}})
	if _, err := Load(p, LoadOptions{Column: "id"}); err == nil || !strings.Contains(err.Error(), "not a string column") {
		t.Errorf("int column: %v", err)
	}
	// A null row.
	s := "a"
	p = filepath.Join(dir, "null.parquet")
	writeParquet(t, p, []optRow{{&s}, {nil}})
	if _, err := Load(p, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "null") {
		t.Errorf("null: %v", err)
	}
	// Invalid UTF-8 in a value.
	p = filepath.Join(dir, "bad.parquet")
	writeParquet(t, p, []textRow{{"ok"}, {"a\xffb"}})
	if _, err := Load(p, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "row 1: invalid UTF-8 at byte 1") {
		t.Errorf("bad utf-8: %v", err)
	}
}

type dictRow struct {
	Text *string `parquet:"text,optional,dict"`
}

// The 4,358 shared rows written the way pyarrow writes HF parquet (optional
// string column, dictionary pages, snappy; also zstd and data page v2, small
// pages and row groups) read back exactly and join to test.joined.txt.
func TestParquetSharedRows(t *testing.T) {
	c, err := Load(sharedWT2(t, "test.rows.jsonl"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joined, err := os.ReadFile(sharedWT2(t, "test.joined.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]dictRow, len(c.Rows))
	for i := range c.Rows {
		rows[i].Text = &c.Rows[i]
	}
	variants := map[string][]parquet.WriterOption{
		"snappy-dict": {parquet.Compression(&parquet.Snappy)},
		"zstd-v2":     {parquet.Compression(&parquet.Zstd), parquet.DataPageVersion(2)},
		"small-pages": {parquet.PageBufferSize(4096), parquet.MaxRowsPerRowGroup(1000)},
	}
	for name, opts := range variants {
		p := filepath.Join(t.TempDir(), "test-00000-of-00001.parquet")
		writeParquet(t, p, rows, opts...)
		pc, err := Load(p, LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s, _ := pc.Text(JoinCompareQ); s != string(joined) {
			t.Fatalf("%s: join differs from test.joined.txt", name)
		}
	}
}
