//go:build linux || darwin

package checkpoint

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the size bytes of f read-only (see mapping). ok is false
// when the system will not map it (the caller then reads through f).
func mapFile(f *os.File, size int64) (m *mapping, ok bool) {
	if size <= 0 || int64(int(size)) != size {
		return nil, false
	}
	p, err := unix.MmapPtr(int(f.Fd()), 0, nil, uintptr(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	return &mapping{data: unsafe.Slice((*byte)(p), int(size))}, true
}

// Close replaces the mapping by an inaccessible anonymous reservation of the
// same addresses: the file is released (its pages leave the process), and a
// slice that outlived Close faults at once instead of ever reading another
// mapping that reused the addresses.
func (m *mapping) Close() error {
	if m.data == nil {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(m.data))
	n := uintptr(len(m.data))
	m.data = nil
	_, err := unix.MmapPtr(-1, 0, p, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}
