package checkpoint

// mapping is a safetensors file mapped read-only into memory: ReadRaw hands
// out slices of it instead of reading a copy, so loading costs no copy and
// no fresh memory, and the kernel may drop and re-read clean pages of a
// model larger than memory. The bytes are read-only: a write into them
// faults (the process stops), so a caller never changes the bytes another
// reader sees; a caller that needs to modify them copies them first. The
// slices are valid until the Model is closed (Close makes the addresses
// inaccessible: see mapFile). Section (a large tensor streamed a block at a
// time: the rows of an embedding) still reads through the file, so a tensor
// that is only streamed never becomes resident in the process. Mapping is
// an optimisation only; without it
// (another system, a file that will not map) tensors are read with ReadAt,
// with the same bytes.
type mapping struct {
	data []byte
}

// tensor returns the bytes of t (validated against the file size by Open),
// capped so that an append cannot reach the next tensor; ok is false when
// there is no mapping (none made, or closed).
func (m *mapping) tensor(t TensorInfo) (b []byte, ok bool) {
	if m == nil || m.data == nil {
		return nil, false
	}
	return m.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size], true
}
