package hub

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/qppl/qppl/internal/atomicfile"
)

// SnapshotDir returns the snapshot directory of repo at revision in the hub
// cache: revision itself when it is a 40-hex commit, else the commit stored
// in refs/<revision>. ok is false when neither exists.
func SnapshotDir(cacheDir string, repo Repo, revision string) (dir string, ok bool) {
	storage := filepath.Join(cacheDir, repo.Folder())
	commit := revision
	if !isCommitHash(revision) {
		b, err := os.ReadFile(filepath.Join(storage, "refs", filepath.FromSlash(revision)))
		if err != nil {
			return "", false
		}
		commit = strings.TrimSpace(string(b))
		if !isCommitHash(commit) {
			return "", false
		}
	}
	dir = filepath.Join(storage, "snapshots", commit)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", false
	}
	return dir, true
}

// CachedFile returns the path of filename in the cached snapshot of repo at
// revision, if that file is present (a symlink must resolve to a regular file).
func CachedFile(cacheDir string, repo Repo, revision, filename string) (string, bool) {
	dir, ok := SnapshotDir(cacheDir, repo, revision)
	if !ok {
		return "", false
	}
	p := filepath.Join(dir, filepath.FromSlash(filename))
	if !isRegular(p) {
		return "", false
	}
	return p, true
}

// snapshotDirs lists every snapshot of repo, the one of revision first, the
// others in name order.
func snapshotDirs(cacheDir string, repo Repo, revision string) []string {
	var dirs []string
	first, ok := SnapshotDir(cacheDir, repo, revision)
	if ok {
		dirs = append(dirs, first)
	}
	ents, err := os.ReadDir(filepath.Join(cacheDir, repo.Folder(), "snapshots"))
	if err != nil {
		return dirs
	}
	var rest []string
	for _, e := range ents {
		p := filepath.Join(cacheDir, repo.Folder(), "snapshots", e.Name())
		if e.IsDir() && p != first {
			rest = append(rest, p)
		}
	}
	sort.Strings(rest)
	return append(dirs, rest...)
}

func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

// globSorted is filepath.Glob keeping regular files only, in name order.
func globSorted(pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range m {
		if isRegular(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func writeRef(storage, revision, commit string) error {
	if revision == commit || revision == "" {
		return nil
	}
	p := filepath.Join(storage, "refs", filepath.FromSlash(revision))
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteBytes(p, []byte(commit), 0o644)
}
