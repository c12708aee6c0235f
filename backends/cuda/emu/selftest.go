package emu

/*
#include <stdlib.h>
const char *emu_selftest(int which, float *out, unsigned grid, unsigned block);
*/
import "C"

import "unsafe"

// selftest runs runtime self-test kernel which (0 shuffles, 1 deadlock,
// 2 barrier in a sync=0 kernel, 3 a 16-byte store at out + grid-1 floats)
// and returns out and the launch error text.
func selftest(which, grid, block int) ([]float32, string) {
	n := grid * block * 4
	p := C.malloc(C.size_t(4 * n))
	defer C.free(p)
	msg := C.emu_selftest(C.int(which), (*C.float)(p), C.uint(grid), C.uint(block))
	out := append([]float32(nil), unsafe.Slice((*float32)(p), n)...)
	if msg != nil {
		return out, C.GoString(msg)
	}
	return out, ""
}
