package atomicfile

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOnlyFileWriter: outside this package, no non-test Go file of the
// module creates or writes a file with os.WriteFile, os.Create,
// os.CreateTemp or os.OpenFile, except the writers listed here, which
// cannot be whole-file writes by nature (each says why). Everything else
// goes through Write/WriteBytes, so no reader and no interrupted run ever
// sees a partial file.
func TestOnlyFileWriter(t *testing.T) {
	allowed := map[string]string{
		"journal/journal.go":       "an append-only journal: records are appended and fsync'd one by one, a torn tail is truncated on open",
		"compare/store.go":         "a streaming store (too large to hold): written to a temporary file, fsync'd and renamed on Close like Write",
		"dataset/hub/client.go":    "a resumable download: bytes are appended to blob.incomplete (HTTP Range) and renamed when complete and verified",
		"dataset/hub/lock_unix.go": "a lock file, never read for its content",
		"cmd/qppl/app.go":          "the output-directory write probe: an empty temporary file, removed at once",
	}
	re := regexp.MustCompile(`\bos\.(WriteFile|Create|CreateTemp|OpenFile)\(|\bioutil\.WriteFile\(`)
	root := filepath.Join("..", "..")
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "internal/atomicfile/") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if !re.MatchString(line) {
				continue
			}
			if _, ok := allowed[rel]; ok {
				found[rel] = true
				continue
			}
			t.Errorf("%s:%d writes a file its own way (use internal/atomicfile): %s", rel, i+1, strings.TrimSpace(line))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range allowed {
		if !found[f] {
			t.Errorf("%s is allowed to write files its own way but no longer does: remove it from the list", f)
		}
	}
}
