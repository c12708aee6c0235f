package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.json")
	if err := WriteBytes(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(p, []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new content" {
		t.Fatalf("read %q, %v", b, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	assertOnly(t, dir, "out.json")
}

// A failing writer leaves the old file untouched and no temporary file.
func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.bin")
	if err := WriteBytes(p, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, 0o644, func(w io.Writer) error {
		w.Write(make([]byte, 3<<20)) // past the buffer: reaches the temp file
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "keep me" {
		t.Fatalf("destination changed to %d bytes", len(b))
	}
	assertOnly(t, dir, "out.bin")
}

func TestWriteMissingDir(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "dir", "f")
	if err := WriteBytes(p, []byte("x"), 0o644); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(names) {
		var got []string
		for _, e := range es {
			got = append(got, e.Name())
		}
		t.Fatalf("directory holds %q, want %q", got, names)
	}
}

// Issue 11 item 12: a failed write names the destination, never the
// temporary file.
func TestErrorsNameTheDestination(t *testing.T) {
	dir := t.TempDir()
	// Renaming over a non-empty directory fails after the temporary file
	// was written.
	dst := filepath.Join(dir, "out.json")
	if err := os.MkdirAll(filepath.Join(dst, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteBytes(dst, []byte("x"), 0o644)
	if err == nil || strings.Contains(err.Error(), ".tmp") || !strings.HasPrefix(err.Error(), "writing "+dst+": ") {
		t.Errorf("rename over a directory: %v", err)
	}
	assertOnly(t, dir, "out.json")
	// A directory nobody can create files in (root included).
	if err := WriteBytes("/proc/self/qppl-out.json", []byte("x"), 0o644); err != nil && strings.Contains(err.Error(), ".tmp") {
		t.Errorf("create in /proc/self: %v", err)
	}
}
