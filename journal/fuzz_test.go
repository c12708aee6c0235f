package journal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedJournals returns valid journals and the usual kinds of damage: a
// torn final record, a torn header, a flipped checksum, a huge length.
func seedJournals(f *testing.F) [][]byte {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed")
	j, _, err := Open(p, []byte(`{"command":"eval","ctx":16}`))
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range records(4) {
		if err := j.Append(r); err != nil {
			f.Fatal(err)
		}
	}
	j.Close()
	good, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	flip := bytes.Clone(good)
	flip[len(magic)+40] ^= 0x55
	return [][]byte{
		good,
		good[:len(good)-5],
		good[:len(magic)+6],
		flip,
		[]byte(magic + "\x02\x00\x00\x00\x00\x00\x00\x00id"),
		[]byte(magic + "\xff\xff\xff\xff\x00\x00\x00\x00"),
		{},
	}
}

// FuzzRead feeds arbitrary bytes to the journal parser: it must never
// panic, and a parse that succeeds accounts for every byte (header, records
// and torn tail).
func FuzzRead(f *testing.F) {
	for _, s := range seedJournals(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		n := len(magic) + 8 + len(c.Identity)
		for _, r := range c.Records {
			n += 8 + len(r)
		}
		if int64(n)+c.Torn != int64(len(data)) {
			t.Fatalf("accounted %d+%d bytes of %d", n, c.Torn, len(data))
		}
	})
}

// FuzzOpen opens arbitrary bytes as an existing journal (with the identity
// it claims, when it parses): Open never panics, and when it succeeds a
// record appended afterwards reads back after the recovered records.
func FuzzOpen(f *testing.F) {
	for _, s := range seedJournals(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "j")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		id := []byte("x")
		if c, err := Parse(data, p); err == nil {
			id = c.Identity
		}
		j, recs, err := Open(p, id)
		if err != nil {
			return
		}
		rec := []byte("appended record")
		if err := j.Append(rec); err != nil {
			t.Fatal(err)
		}
		j.Close()
		c, err := Read(p)
		if err != nil {
			t.Fatalf("journal unreadable after Open+Append: %v", err)
		}
		want := append(recs, rec)
		if !bytes.Equal(c.Identity, id) || c.Torn != 0 || !equalRecords(c.Records, want) {
			t.Fatalf("after Open+Append: identity %q torn %d records %q, want %q", c.Identity, c.Torn, c.Records, want)
		}
	})
}
