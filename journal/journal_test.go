package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func records(n int) [][]byte {
	var rs [][]byte
	for i := range n {
		rs = append(rs, []byte(fmt.Sprintf(`{"window":%d,"nll":%d.5}`, i, i*3)))
	}
	return rs
}

func writeJournal(t *testing.T, path string, id []byte, rs [][]byte) {
	t.Helper()
	j, got, err := Open(path, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("fresh journal returned %d records", len(got))
	}
	for _, r := range rs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripAndResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.journal")
	id := []byte(`{"model":"x","method":"compare_q"}`)
	rs := records(5)
	writeJournal(t, path, id, rs[:3])

	j, got, err := Open(path, id)
	if err != nil {
		t.Fatal(err)
	}
	if !equalRecords(got, rs[:3]) {
		t.Fatalf("resumed records = %q, want %q", got, rs[:3])
	}
	for _, r := range rs[3:] {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Identity, id) || !equalRecords(c.Records, rs) || c.Torn != 0 {
		t.Fatalf("Read = %+v", c)
	}
}

// A kill during Append leaves a prefix of the last frame; every such prefix
// must be detected and truncated, keeping all earlier records.
func TestTornTailEveryOffset(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	id := []byte("id")
	rs := records(3)
	writeJournal(t, full, id, rs)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	lastLen := 8 + len(rs[2])
	for cut := 1; cut < lastLen; cut++ {
		p := filepath.Join(dir, fmt.Sprintf("cut%d", cut))
		if err := os.WriteFile(p, data[:len(data)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		j, got, err := Open(p, id)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !equalRecords(got, rs[:2]) {
			t.Fatalf("cut %d: got %d records", cut, len(got))
		}
		if err := j.Append(rs[2]); err != nil {
			t.Fatal(err)
		}
		j.Close()
		again, _ := os.ReadFile(p)
		if !bytes.Equal(again, data) {
			t.Fatalf("cut %d: re-appended journal differs from the uninterrupted one", cut)
		}
	}
}

// A kill while the header is being written leaves no records; Open starts over.
func TestTornHeader(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	id := []byte("identity")
	writeJournal(t, full, id, nil)
	data, _ := os.ReadFile(full)
	for cut := 1; cut < len(data); cut++ {
		p := filepath.Join(dir, fmt.Sprintf("h%d", cut))
		os.WriteFile(p, data[:cut], 0o644)
		j, got, err := Open(p, id)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		j.Close()
		if len(got) != 0 {
			t.Fatalf("cut at %d: records from a torn header", cut)
		}
		again, _ := os.ReadFile(p)
		if !bytes.Equal(again, data) {
			t.Fatalf("cut at %d: header not rewritten", cut)
		}
	}
}

func TestRejections(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	id := []byte("A")
	writeJournal(t, good, id, records(3))
	data, _ := os.ReadFile(good)

	midCRC := bytes.Clone(data)
	// Flip a payload byte of the first record (header frame is magic+8+1).
	midCRC[len(magic)+8+len(id)+8+2] ^= 0xff
	hugeLen := bytes.Clone(data)
	copy(hugeLen[len(magic)+8+len(id):], []byte{0xff, 0xff, 0xff, 0x7f})

	tests := []struct {
		name string
		data []byte
		id   []byte
		want error
	}{
		{"bad magic", append([]byte("NOTAJRNL"), data[8:]...), id, ErrCorrupt},
		{"checksum mismatch before the end", midCRC, id, ErrCorrupt},
		{"length beyond limit", hugeLen, id, ErrCorrupt},
		{"other run", data, []byte("B"), ErrIdentity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			os.WriteFile(p, tc.data, 0o644)
			_, _, err := Open(p, tc.id)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open error = %v, want %v", err, tc.want)
			}
			after, _ := os.ReadFile(p)
			if !bytes.Equal(after, tc.data) {
				t.Fatal("a refused journal was modified")
			}
		})
	}
}

func equalRecords(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// A journal held open refuses a second Open (another process running the
// same command) until it is closed.
func TestOpenBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.journal")
	id := []byte(`{"run":1}`)
	j, _, err := Open(path, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(path, id); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Open: %v, want ErrBusy", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, _, err := Open(path, id)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	j2.Close()
}

// Empty records (and an empty identity) are valid, also as the last frame
// of the file (found by FuzzRead: an empty read at the end is EOF).
func TestEmptyRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.journal")
	rs := [][]byte{[]byte("a"), {}, {}}
	writeJournal(t, path, nil, rs)
	c, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Identity) != 0 || !equalRecords(c.Records, rs) || c.Torn != 0 {
		t.Fatalf("got %+v", c)
	}
	j, got, err := Open(path, nil)
	if err != nil || !equalRecords(got, rs) {
		t.Fatalf("Open: %q, %v", got, err)
	}
	j.Close()
}
