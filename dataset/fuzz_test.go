package dataset

import (
	"bytes"
	"encoding/base64"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// FuzzArrow: the hand-written Arrow IPC reader never panics on any bytes,
// and every row it returns is valid UTF-8 taken from the input (so the rows
// hold at most len(data) bytes in all).
func FuzzArrow(f *testing.F) {
	for _, k := range []string{"stream", "file", "multi", "null", "large"} {
		b, err := base64.StdEncoding.DecodeString(arrowFixtures[k])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseArrowColumn(data, "text")
		if err != nil {
			return
		}
		total := 0
		for i, r := range rows {
			if !utf8.ValidString(r) {
				t.Fatalf("row %d is not valid UTF-8", i)
			}
			total += len(r)
		}
		if total > len(data) {
			t.Fatalf("%d bytes of rows from %d bytes of input", total, len(data))
		}
	})
}

// FuzzJSONL: ParseJSONL never panics, and rows come back only for valid
// UTF-8 input.
func FuzzJSONL(f *testing.F) {
	f.Add([]byte(`{"text": ""}` + "\n" + `{"text": " = Valkyria = \n"}` + "\n"))
	f.Add([]byte(`{"text": "\ud800"}`))
	f.Add([]byte(`{"text": null}`))
	f.Add([]byte("\n\n{\"text\": \"a\\u00e9\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseJSONL("fuzz.jsonl", data, "text")
		if err != nil {
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("rows returned for invalid UTF-8 input")
		}
		for i, r := range rows {
			if !utf8.ValidString(r) {
				t.Fatalf("row %d is not valid UTF-8", i)
			}
		}
	})
}

// FuzzRawRows: RowsFromRaw and DocumentsFromRaw never panic; RowsFromRaw
// keeps every non-blank line as is, and the llamacpp form of its rows
// differs from the input only where a blank line was not exactly " \n".
func FuzzRawRows(f *testing.F) {
	f.Add(" = A = \n \n text @-@ here .\n \n = = B = = \n x\n")
	f.Add("no newline")
	f.Add("\n\n\n")
	f.Fuzz(func(t *testing.T, raw string) {
		rows := RowsFromRaw(raw)
		n := 0
		for _, r := range rows {
			if r != "" && isBlank(r) {
				t.Fatalf("blank row %q kept", r)
			}
			n += len(r)
		}
		if n > len(raw) {
			t.Fatalf("%d bytes of rows from %d bytes", n, len(raw))
		}
		_ = DocumentsFromRaw(raw)
	})
}

// FuzzParquet: the parquet reader (parquet-go behind magic, footer and row
// count checks, its panics recovered) never panics and returns only valid
// UTF-8 rows.
func FuzzParquet(f *testing.F) {
	var buf bytes.Buffer
	rows := []textRow{{""}, {" = Robert Boulter = \n"}, {" caf\u00e9\n"}}
	if err := parquet.Write(&buf, rows, parquet.MaxRowsPerRowGroup(2)); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := readParquetColumn(bytes.NewReader(data), int64(len(data)), "text")
		if err != nil {
			return
		}
		for i, r := range rows {
			if !utf8.ValidString(r) {
				t.Fatalf("row %d is not valid UTF-8", i)
			}
		}
	})
}
