package dataset

import (
	"encoding/base64"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Arrow IPC fixtures written by an independent implementation, Apache Arrow
// JS 21.2.0 (tableToIPC), base64-encoded:
//   - stream/file: column "text" (Utf8, nullable) in two record batches,
//     rows arrowRows; the same table in the streaming and the file format;
//   - multi: columns id (Int64), text (Utf8), flag (Bool), text = a, bb, é;
//   - null: text = "a", null;
//   - large: text (LargeUtf8) = x, yz.
var arrowFixtures = map[string]string{
	"stream": "/////3gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACAAAAAQAAAABAAAAFAAAABAAGAAEAAsA" +
		"EwAUAAAADAAQAAAAFAAAAAAAAAEYAAAAAAAABRgAAAAEAAAAdGV4dAAAAAAAAAAABAAEAAQAAAD/////mAAAABQAAAAAAAAA" +
		"DAAWABQADwAQAAQADAAAAGAAAAAAAAAAAAAAAxAAAAAEAAoAGAAMAAgABAAKAAAAFAAAAEgAAAAEAAAAAAAAAAAAAAADAAAA" +
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGAAAAAAAAAAYAAAAAAAAAEgAAAAAAAAAAAAAAAEAAAAEAAAAAAAAAAAAAAAAAAAA" +
		"AAAAAAAAAAAeAAAAHgAAAEcAAAAAAAAAID0gVmFsa3lyaWEgQ2hyb25pY2xlcyBJSUkgPSAKIFNlbmrFjSBubyBWYWxreXJp" +
		"YSAzIDogPHVuaz4gQ2hyb25pY2xlcwoA/////5gAAAAUAAAAAAAAAAwAFgAUAA8AEAAEAAwAAAAgAAAAAAAAAAAAAAMQAAAA" +
		"BAAKABgADAAIAAQACgAAABQAAABIAAAAAgAAAAAAAAAAAAAAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABAAAAAAAAAA" +
		"EAAAAAAAAAAQAAAAAAAAAAAAAAABAAAAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACQAAAAAAAAAgMzAgwrAgQwoAAAAAAAAA" +
		"/////wAAAAA=",
	"file": "QVJST1cxAAD/////mAAAABQAAAAAAAAADAAWABQADwAQAAQADAAAAGAAAAAAAAAAAAAAAxAAAAAEAAoAGAAMAAgABAAKAAAA" +
		"FAAAAEgAAAAEAAAAAAAAAAAAAAADAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGAAAAAAAAAAYAAAAAAAAAEgAAAAAAAAA" +
		"AAAAAAEAAAAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAeAAAAHgAAAEcAAAAAAAAAID0gVmFsa3lyaWEgQ2hyb25pY2xlcyBJ" +
		"SUkgPSAKIFNlbmrFjSBubyBWYWxreXJpYSAzIDogPHVuaz4gQ2hyb25pY2xlcwoA/////5gAAAAUAAAAAAAAAAwAFgAUAA8A" +
		"EAAEAAwAAAAgAAAAAAAAAAAAAAMQAAAABAAKABgADAAIAAQACgAAABQAAABIAAAAAgAAAAAAAAAAAAAAAwAAAAAAAAAAAAAA" +
		"AAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAEAAAAAAAAAAQAAAAAAAAAAAAAAABAAAAAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" +
		"CQAAAAAAAAAgMzAgwrAgQwoAAAAAAAAA/////wAAAAAQAAAADAAUAA4AEAAEAAgADAAAABAAAAAUAAAAAAAEAEgAAAAAAAAA" +
		"AAAAAAIAAAAIAAAAAAAAAKAAAAAAAAAAYAAAAAAAAAAIAQAAAAAAAKAAAAAAAAAAIAAAAAAAAAAIAAgAAAAEAAgAAAAEAAAA" +
		"AQAAABQAAAAQABgABAALABMAFAAAAAwAEAAAABQAAAAAAAABGAAAAAAAAAUYAAAABAAAAHRleHQAAAAAAAAAAAQABAAEAAAA" +
		"uAAAAEFSUk9XMQ==",
	"multi": "/////+gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACAAAAAQAAAADAAAAeAAAADQAAAAEAAAA" +
		"pP///xQAAAAAAAABGAAAAAAAAAYUAAAABAAAAGZsYWcAAAAAAAAAANT////Q////FAAAAAAAAAEYAAAAAAAABRgAAAAEAAAA" +
		"dGV4dAAAAAAAAAAABAAEAAQAAAAQABgABAALABMAFAAAAAwAEAAAABQAAAAAAAABFAAAAAAAAAIYAAAAAgAAAGlkAAAAAAAA" +
		"CAAMAAgABwAIAAAAAAAAAUAAAAAAAAAA//////gAAAAUAAAAAAAAAAwAFgAUAA8AEAAEAAwAAABwAAAAAAAAAAAAAAMQAAAA" +
		"BAAKABgADAAIAAQACgAAABQAAACIAAAAAwAAAAAAAAAAAAAABwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABgAAAAAAAAA" +
		"GAAAAAAAAAAAAAAAAAAAABgAAAAAAAAAEAAAAAAAAAAoAAAAAAAAAAgAAAAAAAAAMAAAAAAAAAAAAAAAAAAAADAAAAAAAAAA" +
		"QAAAAAAAAAAAAAAAAwAAAAMAAAAAAAAAAAAAAAAAAAADAAAAAAAAAAAAAAAAAAAAAwAAAAAAAAAAAAAAAAAAAAEAAAAAAAAA" +
		"AgAAAAAAAAADAAAAAAAAAAAAAAABAAAAAwAAAAUAAABhYmLDqQAAAAUAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" +
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAD/////AAAAAA==",
	"null": "/////3gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACAAAAAQAAAABAAAAFAAAABAAGAAEAAsA" +
		"EwAUAAAADAAQAAAAFAAAAAAAAAEYAAAAAAAABRgAAAAEAAAAdGV4dAAAAAAAAAAABAAEAAQAAAD/////mAAAABQAAAAAAAAA" +
		"DAAWABQADwAQAAQADAAAAFgAAAAAAAAAAAAAAxAAAAAEAAoAGAAMAAgABAAKAAAAFAAAAEgAAAACAAAAAAAAAAAAAAADAAAA" +
		"AAAAAAAAAABAAAAAAAAAAEAAAAAAAAAAEAAAAAAAAABQAAAAAAAAAAgAAAAAAAAAAAAAAAEAAAACAAAAAAAAAAEAAAAAAAAA" +
		"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABAAAA" +
		"AQAAAAAAAABhAAAAAAAAAP////8AAAAA",
	"large": "/////3gAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACAAAAAQAAAABAAAAFAAAABAAGAAEAAsA" +
		"EwAUAAAADAAQAAAAFAAAAAAAAAEYAAAAAAAAFBgAAAAEAAAAdGV4dAAAAAAAAAAABAAEAAQAAAD/////mAAAABQAAAAAAAAA" +
		"DAAWABQADwAQAAQADAAAACAAAAAAAAAAAAAAAxAAAAAEAAoAGAAMAAgABAAKAAAAFAAAAEgAAAACAAAAAAAAAAAAAAADAAAA" +
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGAAAAAAAAAAYAAAAAAAAAAgAAAAAAAAAAAAAAAEAAAACAAAAAAAAAAAAAAAAAAAA" +
		"AAAAAAAAAAABAAAAAAAAAAMAAAAAAAAAeHl6AAAAAAD/////AAAAAA==",
}

var arrowRows = []string{"", " = Valkyria Chronicles III = \n", "", " Senjō no Valkyria 3 : <unk> Chronicles\n", "", " 30 \u00b0 C\n"}

func arrowFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(arrowFixtures[name])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestArrowFixtures(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		fixture, file, col string
		want               []string
		err                string
	}{
		{"stream", "wikitext-test.arrow", "", arrowRows, ""},
		{"stream", "noext", "", arrowRows, ""}, // detected by the continuation marker
		{"file", "data.arrow", "", arrowRows, ""},
		{"file", "noext2", "", arrowRows, ""}, // detected by "ARROW1"
		{"multi", "multi.arrow", "", []string{"a", "bb", "\u00e9"}, ""},
		{"multi", "multi.arrow", "id", nil, `column "id" is not a string column`},
		{"multi", "multi.arrow", "body", nil, `no column "body"`},
		{"null", "null.arrow", "", nil, "1 nulls"},
		{"large", "large.arrow", "", []string{"x", "yz"}, ""},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.file)
		if err := os.WriteFile(p, arrowFixture(t, tt.fixture), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, LoadOptions{Column: tt.col})
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.file) {
				t.Errorf("%s/%s: err = %v, want %q", tt.fixture, tt.file, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s/%s: %v", tt.fixture, tt.file, err)
			continue
		}
		if c.Kind != KindArrow || strings.Join(c.Rows, "|") != strings.Join(tt.want, "|") || len(c.Rows) != len(tt.want) {
			t.Errorf("%s/%s: kind %s rows %q, want %q", tt.fixture, tt.file, c.Kind, c.Rows, tt.want)
		}
	}
}

// Every truncation and byte corruption of the fixtures gives an error or a
// result, never a panic, and truncations are always errors.
func TestArrowCorruption(t *testing.T) {
	for _, name := range []string{"stream", "file", "multi"} {
		data := arrowFixture(t, name)
		for n := 0; n < len(data); n++ {
			if _, err := parseArrowColumn(data[:n], "text"); err == nil {
				t.Errorf("%s truncated to %d bytes: no error", name, n)
			}
		}
		for i := 0; i < len(data); i++ {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				b := append([]byte(nil), data...)
				b[i] ^= x
				parseArrowColumn(b, "text")
			}
		}
	}
}

// A record batch claiming 2^62 rows (batch and column length) with a
// small offsets buffer is rejected, not read past the buffer: (length+1)·4
// overflows int64, so the bound must not be computed by multiplication.
func TestArrowHugeLength(t *testing.T) {
	for _, huge := range []int64{1 << 62, 1<<63 - 1, 1 << 61} {
		data, err := base64.StdEncoding.DecodeString(arrowFixtures["stream"])
		if err != nil {
			t.Fatal(err)
		}
		patched := false
		for pos := 0; !patched; {
			n, _ := u32(data, pos)
			pos += 4
			if n == 0xFFFFFFFF {
				n, _ = u32(data, pos)
				pos += 4
			}
			if n == 0 {
				break
			}
			meta := data[pos : pos+int(n)]
			msg, err := fbRoot(meta)
			if err != nil {
				t.Fatal(err)
			}
			kind, _ := msg.u8(1, 0)
			bodyLen, _ := msg.i64(3, 0)
			if kind == msgRecordBatch {
				rb, _, err := msg.table(2)
				if err != nil {
					t.Fatal(err)
				}
				ns, _, err := rb.vector(1, 16)
				if err != nil {
					t.Fatal(err)
				}
				binary.LittleEndian.PutUint64(meta[rb.field(0):], uint64(huge))
				binary.LittleEndian.PutUint64(meta[ns:], uint64(huge))
				patched = true
			}
			pos += int(n) + int(bodyLen)
		}
		if !patched {
			t.Fatal("no record batch in the fixture")
		}
		_, err = parseArrowColumn(data, "text")
		if err == nil || !strings.Contains(err.Error(), "offsets buffer") {
			t.Errorf("length %d: err %v, want the offsets-buffer error", huge, err)
		}
	}
}
