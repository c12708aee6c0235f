package dataset

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/qppl/qppl/internal/atomicfile"
)

// ReadTokens reads an int32 little-endian token file. The file length must be
// a multiple of 4; otherwise the error names the file and its length.
func ReadTokens(path string) ([]int32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: reading tokens: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dataset: reading tokens %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("dataset: token file %s is not a regular file", path)
	}
	n := st.Size()
	if n%4 != 0 {
		return nil, fmt.Errorf("dataset: token file %s: length %d bytes is not a multiple of 4 (int32 little-endian expected)", path, n)
	}
	// The allocation is bounded by the file's own size.
	buf := make([]byte, n)
	if _, err := readFull(f, buf); err != nil {
		return nil, fmt.Errorf("dataset: reading tokens %s: %w", path, err)
	}
	ids := make([]int32, n/4)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return ids, nil
}

// WriteTokens writes ids as int32 little-endian, atomically: the data go to a
// temporary file in the same directory, which is synced and renamed over path.
func WriteTokens(path string, ids []int32) error {
	buf := make([]byte, 4*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
	}
	if err := WriteFileAtomic(path, buf, 0o644); err != nil {
		return fmt.Errorf("dataset: writing tokens: %w", err)
	}
	return nil
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory (synced, then renamed), so readers never see a partial file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return atomicfile.WriteBytes(path, data, perm)
}

func readFull(f *os.File, buf []byte) (int, error) {
	total := 0
	for total < len(buf) {
		n, err := f.Read(buf[total:])
		total += n
		if err != nil {
			if total == len(buf) {
				break
			}
			return total, fmt.Errorf("short read (%d of %d bytes): %w", total, len(buf), err)
		}
	}
	return total, nil
}
