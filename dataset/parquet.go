package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// ReadParquetColumn reads every value of the top-level string column col of a
// parquet file, in row order. Nulls, non-string columns, repeated columns and
// invalid UTF-8 are errors naming the file. A malformed file gives an error,
// never a panic: panics inside the parquet library are recovered and reported.
func ReadParquetColumn(path, col string) (rows []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", path, err)
	}
	rows, err = readParquetColumn(f, st.Size(), col)
	if err != nil {
		return nil, fmt.Errorf("dataset: parquet %s: %w", path, err)
	}
	return rows, nil
}

func readParquetColumn(r io.ReaderAt, size int64, col string) (rows []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			rows, err = nil, fmt.Errorf("malformed file (parquet reader failed: %v)", p)
		}
	}()
	if size < 12 {
		return nil, fmt.Errorf("file too short (%d bytes) to be parquet", size)
	}
	// Check the magic numbers and the footer length before the library
	// allocates a buffer of the length the file claims.
	var head, tail [4]byte
	var foot [8]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, err
	}
	if _, err := r.ReadAt(foot[:], size-8); err != nil {
		return nil, err
	}
	copy(tail[:], foot[4:])
	if string(head[:]) != "PAR1" || string(tail[:]) != "PAR1" {
		return nil, fmt.Errorf("not a parquet file (magic %q…%q, want \"PAR1\"; encrypted files are not supported)", head[:], tail[:])
	}
	if n := int64(binary.LittleEndian.Uint32(foot[:4])); n == 0 || n > size-12 {
		return nil, fmt.Errorf("footer length %d does not fit in a %d-byte file (truncated?)", n, size)
	}
	pf, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	c := pf.Root().Column(col)
	if c == nil {
		var names []string
		for _, cc := range pf.Root().Columns() {
			names = append(names, cc.Name())
		}
		return nil, fmt.Errorf("no column %q (columns: %s)", col, strings.Join(names, ", "))
	}
	if !c.Leaf() || c.Repeated() || c.Type().Kind() != parquet.ByteArray {
		return nil, fmt.Errorf("column %q is not a string column (%v)", col, c.Type())
	}
	idx := c.Index()
	n := pf.NumRows()
	if n < 0 {
		return nil, fmt.Errorf("negative row count %d in footer", n)
	}
	// Each row takes at least one bit on disk, so a footer claiming more rows
	// than 8×size is corrupt; do not preallocate from it.
	if n > 8*size {
		return nil, fmt.Errorf("footer claims %d rows in a %d-byte file", n, size)
	}
	// Preallocate no more than the file could hold as plain values (4-byte
	// length each); dictionary-encoded files grow the slice as they decode.
	rows = make([]string, 0, min(n, size/4))
	buf := make([]parquet.Value, 256)
	for gi, rg := range pf.RowGroups() {
		chunks := rg.ColumnChunks()
		if idx < 0 || idx >= len(chunks) {
			return nil, fmt.Errorf("row group %d has no chunk for column %q", gi, col)
		}
		want := rg.NumRows()
		got := int64(0)
		pages := chunks[idx].Pages()
		for {
			page, err := pages.ReadPage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				pages.Close()
				return nil, fmt.Errorf("row group %d: %w", gi, err)
			}
			vr := page.Values()
			for {
				k, err := vr.ReadValues(buf)
				for _, v := range buf[:k] {
					if v.IsNull() {
						pages.Close()
						return nil, fmt.Errorf("row group %d: null in column %q at row %d", gi, col, len(rows))
					}
					b := v.ByteArray()
					if off := firstInvalidUTF8(b); off >= 0 {
						pages.Close()
						return nil, fmt.Errorf("column %q row %d: invalid UTF-8 at byte %d of the value", col, len(rows), off)
					}
					rows = append(rows, string(b))
					got++
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					pages.Close()
					return nil, fmt.Errorf("row group %d: %w", gi, err)
				}
				if k == 0 {
					pages.Close()
					return nil, fmt.Errorf("row group %d: page reader made no progress", gi)
				}
			}
			parquet.Release(page)
		}
		pages.Close()
		if got != want {
			return nil, fmt.Errorf("row group %d: %d values for %d rows", gi, got, want)
		}
	}
	if int64(len(rows)) != n {
		return nil, fmt.Errorf("%d rows read, footer says %d", len(rows), n)
	}
	return rows, nil
}
