package suite

import (
	"fmt"
	"io"
	"path/filepath"
)

// FreeSpace reports the bytes free for writing under a directory.
type FreeSpace func(dir string) (uint64, error)

// CheckSpace prints the size of a file about to be written (what, path,
// need bytes) to log and refuses it when the file system holding its
// directory has less free space (free nil: statfs). When the free space
// cannot be read, only the size is printed.
func CheckSpace(what, path string, need int64, free FreeSpace, log io.Writer) error {
	if log != nil {
		fmt.Fprintf(log, "%s: %s → %s\n", what, HumanBytes(need), path)
	}
	if free == nil {
		free = freeBytes
	}
	dir := filepath.Dir(path)
	have, err := free(dir)
	if err != nil {
		return nil
	}
	if need > 0 && uint64(need) > have {
		return fmt.Errorf("%s needs %s but %s has %s free: free space, give another --cache-dir (or --run-dir), or a smaller --logits-format (f32 → u16), --rows or --kld-mode",
			what, HumanBytes(need), dir, HumanBytes(int64(have)))
	}
	return nil
}

// HumanBytes writes n in B, KiB, MiB, GiB or TiB with three significant
// digits (all integer digits from 1000 up: 1020 KiB, not 1.02e+03).
func HumanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return sig3(f) + " " + u
		}
		f /= 1024
	}
	return sig3(f) + " TiB"
}

func sig3(f float64) string {
	if f >= 100 {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.3g", f)
}
