package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the journal reader: it must never panic
// and must either return records whose frames re-encode to a prefix of the
// input or an error.
func FuzzRead(f *testing.F) {
	f.Add([]byte(magic + "\x02\x00\x00\x00\x00\x00\x00\x00id"))
	f.Add([]byte("QPPLJRN1\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "j")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Read(p)
		if err != nil {
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
