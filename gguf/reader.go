package gguf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Sentinel errors wrapped by every error of this package.
var (
	// ErrFormat: a GGUF file is malformed (or lies about its sizes).
	ErrFormat = errors.New("invalid GGUF")
	// ErrUnsupported: a valid GGUF file this package cannot evaluate
	// exactly (unknown type id, architecture, key).
	ErrUnsupported = errors.New("unsupported GGUF")
)

// Limits on what a header may claim, far above any real file: they bound
// what a hostile file can make the reader allocate.
const (
	// MaxStringLen bounds one metadata string (chat templates are tens of
	// kilobytes) or tensor name.
	MaxStringLen = 16 << 20
	// MaxHeaderBytes bounds the header (metadata and tensor infos); a
	// 150k-token vocabulary with its merges is about 10 MB.
	MaxHeaderBytes = 256 << 20
	// MaxArrayDepth bounds the nesting of array values.
	MaxArrayDepth = 8
	// MaxDims is ggml's GGML_MAX_DIMS.
	MaxDims = 4
	// MaxNameLen is ggml's GGML_MAX_NAME less its terminating zero.
	MaxNameLen = 63
	// DefaultAlignment applies when general.alignment is absent.
	DefaultAlignment = 32
)

// magic is "GGUF" read as a little-endian uint32.
const magic = 0x46554747

// KV is one metadata key and value, in file order.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name string
	// Dims are ggml's ne: Dims[0] is the innermost (contiguous) dimension,
	// so a Hugging Face [out, in] weight has Dims {in, out}.
	Dims   []int64
	Type   Type
	File   string // path of the file holding it
	Offset int64  // absolute byte offset of the data in File
	Size   int64  // bytes
}

// Numel returns the number of elements.
func (t TensorInfo) Numel() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows returns the number of rows of ne0 elements (the product of
// Dims[1:]).
func (t TensorInfo) Rows() int64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Numel() / t.Dims[0]
}

// File is one parsed and validated GGUF file. Tensor data is read on demand
// through the io.ReaderAt it was opened on.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64
	DataOffset int64 // absolute offset of the tensor data section
	Size       int64 // file size
	KVs        []KV
	Tensors    []TensorInfo // in file order

	r      io.ReaderAt
	kv     map[string]int
	tensor map[string]int
}

// Get returns a metadata value.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kv[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns a tensor's description.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.tensor[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// ReadRaw reads a tensor's bytes.
func (f *File) ReadRaw(name string) ([]byte, error) {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	return f.readAt(ti, 0, ti.Size)
}

// readAt reads n bytes at offset off inside tensor ti.
func (f *File) readAt(ti TensorInfo, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > ti.Size || n > ti.Size-off {
		return nil, fmt.Errorf("%s: tensor %q: bytes [%d, +%d) outside its %d bytes", f.Path, ti.Name, off, n, ti.Size)
	}
	buf := make([]byte, n)
	if got, err := f.r.ReadAt(buf, ti.Offset+off); int64(got) != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at %d: %w", f.Path, ti.Name, n, ti.Offset+off, err)
	}
	return buf, nil
}

// decoder reads the header with a running offset and the number of bytes
// left in the file, so every count is checked before it is allocated.
type decoder struct {
	path string
	br   *bufio.Reader
	pos  int64
	size int64 // file size
	err  error
}

func (d *decoder) left() int64 { return d.size - d.pos }

func (d *decoder) fail(field string, f string, a ...any) error {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s (at byte %d): %s", ErrFormat, d.path, field, d.pos, fmt.Sprintf(f, a...))
	}
	return d.err
}

// bytes reads exactly n bytes (n already checked against left()).
func (d *decoder) read(field string, n int64) ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	if n < 0 || n > d.left() {
		return nil, d.fail(field, "needs %d bytes, the file has %d left (truncated?)", n, d.left())
	}
	if d.pos+n > MaxHeaderBytes {
		return nil, d.fail(field, "header larger than %d bytes", MaxHeaderBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(d.br, buf); err != nil {
		return nil, d.fail(field, "reading %d bytes: %v", n, err)
	}
	d.pos += n
	return buf, nil
}

func (d *decoder) u32(field string) (uint32, error) {
	b, err := d.read(field, 4)
	if err != nil {
		return 0, err
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (d *decoder) u64(field string) (uint64, error) {
	b, err := d.read(field, 8)
	if err != nil {
		return 0, err
	}
	return uint64(scalarBits(TypeUint64, b)), nil
}

// count reads a uint64 element count of items of at least minSize bytes
// each and checks that they fit in what is left of the file.
func (d *decoder) count(field string, minSize int64) (int, error) {
	n, err := d.u64(field)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(d.left()/minSize) {
		return 0, d.fail(field, "count %d needs at least %d bytes each, the file has %d left", n, minSize, d.left())
	}
	return int(n), nil
}

func (d *decoder) str(field string) (string, error) {
	n, err := d.u64(field + " length")
	if err != nil {
		return "", err
	}
	if n > MaxStringLen {
		return "", d.fail(field, "string length %d exceeds %d", n, uint64(MaxStringLen))
	}
	if n > uint64(d.left()) {
		return "", d.fail(field, "string length %d, the file has %d bytes left (truncated?)", n, d.left())
	}
	b, err := d.read(field, int64(n))
	return string(b), err
}

func (d *decoder) value(field string, t ValueType, depth int) (Value, error) {
	switch {
	case t == TypeString:
		s, err := d.str(field)
		return Value{Type: t, str: s}, err
	case t == TypeArray:
		if depth >= MaxArrayDepth {
			return Value{}, d.fail(field, "arrays nested deeper than %d", MaxArrayDepth)
		}
		et, err := d.u32(field + " element type")
		if err != nil {
			return Value{}, err
		}
		elem := ValueType(et)
		if elem > TypeFloat64 {
			return Value{}, d.fail(field, "unknown array element type %d", et)
		}
		n, err := d.count(field+" array length", elem.minSize())
		if err != nil {
			return Value{}, err
		}
		a := &Array{Elem: elem, Len: n}
		switch elem {
		case TypeString:
			// Grown as elements are read: memory follows the bytes
			// actually present, not the count claimed.
			a.strs = make([]string, 0, min(n, 1<<16))
			for i := range n {
				s, err := d.str(fmt.Sprintf("%s[%d]", field, i))
				if err != nil {
					return Value{}, err
				}
				a.strs = append(a.strs, s)
			}
		case TypeArray:
			a.elems = make([]Value, 0, min(n, 1<<16))
			for i := range n {
				e, err := d.value(fmt.Sprintf("%s[%d]", field, i), TypeArray, depth+1)
				if err != nil {
					return Value{}, err
				}
				a.elems = append(a.elems, e)
			}
		default:
			if a.raw, err = d.read(field, int64(n)*int64(elem.scalarSize())); err != nil {
				return Value{}, err
			}
			if elem == TypeBool {
				for i, b := range a.raw {
					if b > 1 {
						return Value{}, d.fail(fmt.Sprintf("%s[%d]", field, i), "bool byte %d is neither 0 nor 1", b)
					}
				}
			}
		}
		return Value{Type: t, arr: a}, nil
	case t.scalarSize() > 0:
		b, err := d.read(field, int64(t.scalarSize()))
		if err != nil {
			return Value{}, err
		}
		if t == TypeBool && b[0] > 1 {
			return Value{}, d.fail(field, "bool byte %d is neither 0 nor 1", b[0])
		}
		return Value{Type: t, bits: scalarBits(t, b)}, nil
	}
	return Value{}, d.fail(field, "unknown value type %d", uint32(t))
}

// Open parses and validates the GGUF file r of size bytes; path names it in
// errors. Every count, length, offset and size is checked against the file
// before anything is allocated from it, and tensor data is not read. The
// tensors must lie inside the data section, at aligned offsets, without
// overlapping; each one's byte size is its element count in whole blocks
// of its type.
func Open(r io.ReaderAt, size int64, path string) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: %s: negative size %d", ErrFormat, path, size)
	}
	d := &decoder{path: path, br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	m, err := d.u32("magic")
	if err != nil {
		return nil, err
	}
	if m != magic {
		return nil, d.fail("magic", "%q is not \"GGUF\"", []byte{byte(m), byte(m >> 8), byte(m >> 16), byte(m >> 24)})
	}
	f := &File{Path: path, Size: size, r: r, kv: map[string]int{}, tensor: map[string]int{}, Alignment: DefaultAlignment}
	if f.Version, err = d.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return nil, fmt.Errorf("%w: %s: version: GGUF v1 (32-bit counts) is not supported; reconvert the model", ErrUnsupported, path)
	case f.Version&0xffff == 0 && f.Version != 0:
		return nil, fmt.Errorf("%w: %s: version: %#x reads as a big-endian GGUF file, which is not supported", ErrUnsupported, path, f.Version)
	default:
		return nil, d.fail("version", "%d (supported: 2, 3)", f.Version)
	}
	// A tensor info takes at least name length (8), n_dims (4), one
	// dimension (8), type (4) and offset (8); a key/value at least 8+4.
	nt, err := d.count("tensor_count", 32)
	if err != nil {
		return nil, err
	}
	nkv, err := d.count("metadata_kv_count", 12)
	if err != nil {
		return nil, err
	}
	f.KVs = make([]KV, 0, min(nkv, 1<<12))
	for i := range nkv {
		field := fmt.Sprintf("metadata key %d", i)
		key, err := d.str(field)
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, d.fail(field, "empty key")
		}
		field = fmt.Sprintf("metadata %q", key)
		if _, dup := f.kv[key]; dup {
			return nil, d.fail(field, "key appears twice")
		}
		t, err := d.u32(field + " type")
		if err != nil {
			return nil, err
		}
		v, err := d.value(field, ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		f.kv[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{key, v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Uint()
		if !ok || v.Type != TypeUint32 || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("%w: %s: metadata \"general.alignment\" = %v (%s) must be a power of two uint32", ErrFormat, path, v, v.Type)
		}
		f.Alignment = int64(a)
	}
	f.Tensors = make([]TensorInfo, 0, min(nt, 1<<12))
	for i := range nt {
		field := fmt.Sprintf("tensor info %d", i)
		name, err := d.str(field + " name")
		if err != nil {
			return nil, err
		}
		if name == "" || len(name) > MaxNameLen {
			return nil, d.fail(field+" name", "%q must be 1 to %d bytes", name, MaxNameLen)
		}
		field = fmt.Sprintf("tensor %q", name)
		if _, dup := f.tensor[name]; dup {
			return nil, d.fail(field, "name appears twice")
		}
		nd, err := d.u32(field + " n_dims")
		if err != nil {
			return nil, err
		}
		if nd < 1 || nd > MaxDims {
			return nil, d.fail(field+" n_dims", "%d outside [1, %d]", nd, MaxDims)
		}
		ti := TensorInfo{Name: name, Dims: make([]int64, nd), File: path}
		numel := int64(1)
		for k := range ti.Dims {
			n, err := d.u64(fmt.Sprintf("%s ne[%d]", field, k))
			if err != nil {
				return nil, err
			}
			if n == 0 || n > math.MaxInt64 || int64(n) > math.MaxInt64/numel {
				return nil, d.fail(fmt.Sprintf("%s ne[%d]", field, k), "%d: dimensions must be positive and their product fit in int64", n)
			}
			ti.Dims[k] = int64(n)
			numel *= int64(n)
		}
		t, err := d.u32(field + " type")
		if err != nil {
			return nil, err
		}
		ti.Type = Type(t)
		if !ti.Type.Known() {
			return nil, fmt.Errorf("%w: %s: %s type: unknown ggml type id %d", ErrUnsupported, path, field, t)
		}
		if bs := int64(ti.Type.BlockSize()); ti.Dims[0]%bs != 0 {
			return nil, d.fail(field+" ne[0]", "%d is not a multiple of %s's block size %d", ti.Dims[0], ti.Type, bs)
		}
		if ti.Size, err = rowBytes(ti.Type, numel); err != nil {
			return nil, d.fail(field, "%v", err)
		}
		off, err := d.u64(field + " offset")
		if err != nil {
			return nil, err
		}
		if off > math.MaxInt64 || int64(off)%f.Alignment != 0 {
			return nil, d.fail(field+" offset", "%d is not a multiple of the alignment %d", off, f.Alignment)
		}
		ti.Offset = int64(off) // relative until the data section is known
		f.tensor[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	// The data section starts at the next multiple of the alignment.
	pad := (f.Alignment - d.pos%f.Alignment) % f.Alignment
	f.DataOffset = d.pos + pad
	if f.DataOffset > size {
		if len(f.Tensors) > 0 {
			return nil, d.fail("data section", "starts at %d, past the end of the %d-byte file (truncated?)", f.DataOffset, size)
		}
		f.DataOffset = size // a tensor-less file may end right after its header
	}
	dataSize := size - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	var end int64
	for k, i := range order {
		ti := &f.Tensors[i]
		if ti.Offset > dataSize || ti.Size > dataSize-ti.Offset {
			return nil, fmt.Errorf("%w: %s: tensor %q offset: bytes [%d, +%d) of the data section end past its %d bytes (truncated?)", ErrFormat, path, ti.Name, ti.Offset, ti.Size, dataSize)
		}
		if k > 0 && ti.Offset < end {
			return nil, fmt.Errorf("%w: %s: tensor %q offset: %d overlaps tensor %q, which ends at %d", ErrFormat, path, ti.Name, ti.Offset, f.Tensors[order[k-1]].Name, end)
		}
		end = ti.Offset + ti.Size
		ti.Offset += f.DataOffset
	}
	return f, nil
}
