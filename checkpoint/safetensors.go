package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrFormat: a safetensors file or shard index is malformed.
	ErrFormat = errors.New("invalid safetensors")
	// ErrConfig: config.json is malformed, incomplete or unsupported.
	ErrConfig = errors.New("invalid config")
	// ErrNotFound: a file or tensor does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnsupported: a dtype has no float64 decoding.
	ErrUnsupported = errors.New("unsupported dtype")
)

// MaxHeaderSize is the largest header length accepted (as the Rust crate).
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header key holding string metadata.
const metadataKey = "__metadata__"

// TensorInfo describes one tensor stored in a safetensors file.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int
	File   string // path (or name) of the file holding it
	Offset int64  // absolute byte offset of the data in File
	Size   int64  // bytes
}

// Numel returns the number of elements (1 for a scalar).
func (t TensorInfo) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d) // validated by Open not to overflow
	}
	return n
}

// File is one validated safetensors file read through an io.ReaderAt.
type File struct {
	name     string
	r        io.ReaderAt
	size     int64
	dataBase int64 // 8+N
	tensors  map[string]TensorInfo
	names    []string // sorted
	metadata map[string]string
	mapped   *mapping // nil: tensors are read through r
}

// Name returns the name given to Open.
func (f *File) Name() string { return f.name }

// Size returns the file size in bytes.
func (f *File) Size() int64 { return f.size }

// HeaderSize returns N, the JSON header length (padding included).
func (f *File) HeaderSize() int64 { return f.dataBase - 8 }

// Metadata returns the __metadata__ map (nil when absent). Do not modify it.
func (f *File) Metadata() map[string]string { return f.metadata }

// Names returns the tensor names, sorted.
func (f *File) Names() []string { return append([]string(nil), f.names...) }

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// ReadRaw returns the raw little-endian bytes of a tensor.
func (f *File) ReadRaw(name string) ([]byte, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q: %w", f.name, name, ErrNotFound)
	}
	if b, ok := f.mapped.tensor(t); ok {
		return b, nil
	}
	return readRaw(f.r, t)
}

// Section returns a reader over a tensor's bytes, for streaming large tensors.
func (f *File) Section(name string) (*io.SectionReader, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q: %w", f.name, name, ErrNotFound)
	}
	return io.NewSectionReader(f.r, t.Offset, t.Size), nil
}

// ReadFloat64 decodes a tensor exactly into float64 (see DecodeFloat64),
// returning its row-major values and shape.
func (f *File) ReadFloat64(name string) ([]float64, []int, error) {
	t, ok := f.tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("%s: tensor %q: %w", f.name, name, ErrNotFound)
	}
	if b, ok := f.mapped.tensor(t); ok {
		return decodeFloat64(b, t)
	}
	return readFloat64(f.r, t)
}

func readRaw(r io.ReaderAt, t TensorInfo) ([]byte, error) {
	// t.Size was validated against the file size by Open.
	buf := make([]byte, t.Size)
	if n, err := r.ReadAt(buf, t.Offset); n != len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%s: tensor %q: reading %d bytes at %d: %w", t.File, t.Name, t.Size, t.Offset, err)
	}
	return buf, nil
}

func readFloat64(r io.ReaderAt, t TensorInfo) ([]float64, []int, error) {
	if !t.DType.Decodable() { // refused before reading
		return decodeFloat64(nil, t)
	}
	raw, err := readRaw(r, t)
	if err != nil {
		return nil, nil, err
	}
	return decodeFloat64(raw, t)
}

func decodeFloat64(raw []byte, t TensorInfo) ([]float64, []int, error) {
	if !t.DType.Decodable() {
		return nil, nil, fmt.Errorf("%s: tensor %q: %w: %s has no float64 decoding", t.File, t.Name, ErrUnsupported, t.DType)
	}
	out := make([]float64, t.Numel())
	if err := DecodeFloat64(t.DType, raw, out); err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %q: %w", t.File, t.Name, err)
	}
	return out, append([]int(nil), t.Shape...), nil
}

// formatErr builds an ErrFormat error naming the file (and tensor).
func formatErr(file, tensor, f string, a ...any) error {
	msg := fmt.Sprintf(f, a...)
	if tensor != "" {
		return fmt.Errorf("%w: %s: tensor %q: %s", ErrFormat, file, tensor, msg)
	}
	return fmt.Errorf("%w: %s: %s", ErrFormat, file, msg)
}

// Open validates the safetensors header of r (size bytes long). name is used
// in error messages and as TensorInfo.File. Only the header is read.
func Open(r io.ReaderAt, size int64, name string) (*File, error) {
	if size < 8 {
		return nil, formatErr(name, "", "file is %d bytes, shorter than the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if n, err := r.ReadAt(lenBuf[:], 0); n != 8 {
		return nil, formatErr(name, "", "reading header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	// Bound N before allocating anything: a header claiming 2^60 bytes must
	// be rejected here, not by a failed allocation.
	if n > MaxHeaderSize {
		return nil, formatErr(name, "", "header length %d exceeds the limit %d", n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, formatErr(name, "", "header length %d exceeds the %d bytes after the length field", n, size-8)
	}
	if n < 2 {
		return nil, formatErr(name, "", "header length %d is too short for a JSON object", n)
	}
	hdr := make([]byte, n)
	if got, err := r.ReadAt(hdr, 8); got != len(hdr) {
		return nil, formatErr(name, "", "reading %d header bytes: %v", n, err)
	}
	f := &File{name: name, r: r, size: size, dataBase: 8 + int64(n)}
	if err := f.parseHeader(hdr); err != nil {
		return nil, err
	}
	return f, nil
}

// rawEntry is one tensor entry of the header JSON.
type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func (f *File) parseHeader(hdr []byte) error {
	name := f.name
	if hdr[0] != '{' {
		return formatErr(name, "", "header does not start with '{'")
	}
	if !utf8.Valid(hdr) {
		return formatErr(name, "", "header is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // '{'
		return formatErr(name, "", "header JSON: %v", err)
	}
	f.tensors = make(map[string]TensorInfo)
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return formatErr(name, "", "header JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return formatErr(name, "", "header JSON: key %v is not a string", tok)
		}
		if key == metadataKey {
			if seenMeta {
				return formatErr(name, "", "duplicate %s", metadataKey)
			}
			seenMeta = true
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return formatErr(name, "", "%s must be an object of strings: %v", metadataKey, err)
			}
			f.metadata = md
			continue
		}
		if _, dup := f.tensors[key]; dup {
			return formatErr(name, key, "duplicate tensor name")
		}
		var e rawEntry
		if err := dec.Decode(&e); err != nil {
			return formatErr(name, key, "entry: %v", err)
		}
		t, err := f.entry(key, e)
		if err != nil {
			return err
		}
		f.tensors[key] = t
		f.names = append(f.names, key)
		begin := t.Offset - f.dataBase
		spans = append(spans, span{key, begin, begin + t.Size})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return formatErr(name, "", "header JSON: %v", err)
	}
	// Only space padding may follow the object.
	for i, c := range hdr[dec.InputOffset():] {
		if c != ' ' {
			return formatErr(name, "", "header byte %d after the JSON object is %q, want space padding", dec.InputOffset()+int64(i), c)
		}
	}
	sort.Strings(f.names)
	// Offsets sorted by begin must tile [0, last_end) exactly.
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		if spans[i].end != spans[j].end {
			return spans[i].end < spans[j].end
		}
		return spans[i].name < spans[j].name
	})
	var end int64
	for _, s := range spans {
		switch {
		case s.begin > end:
			return formatErr(name, s.name, "data_offsets begin at %d, leaving a hole after byte %d", s.begin, end)
		case s.begin < end:
			return formatErr(name, s.name, "data_offsets [%d, %d] overlap the previous tensor ending at %d", s.begin, s.end, end)
		}
		end = s.end
	}
	if want := f.dataBase + end; f.size != want {
		if f.size > want {
			return formatErr(name, "", "file is %d bytes, %d trailing bytes after the last tensor ending at %d", f.size, f.size-want, want)
		}
		return formatErr(name, "", "file is %d bytes, truncated: tensors end at byte %d", f.size, want)
	}
	return nil
}

// entry validates one header entry and converts it to a TensorInfo.
func (f *File) entry(key string, e rawEntry) (TensorInfo, error) {
	name := f.name
	switch {
	case e.DType == nil:
		return TensorInfo{}, formatErr(name, key, "missing dtype")
	case e.Shape == nil:
		return TensorInfo{}, formatErr(name, key, "missing shape")
	case e.DataOffsets == nil:
		return TensorInfo{}, formatErr(name, key, "missing data_offsets")
	}
	dt := DType(*e.DType)
	if !dt.Known() {
		return TensorInfo{}, formatErr(name, key, "unknown dtype %q", *e.DType)
	}
	numel := int64(1)
	shape := make([]int, len(*e.Shape))
	for i, d := range *e.Shape {
		if d < 0 {
			return TensorInfo{}, formatErr(name, key, "negative dimension %d in shape %v", d, *e.Shape)
		}
		if d != 0 && numel > math.MaxInt64/d {
			return TensorInfo{}, formatErr(name, key, "shape %v overflows", *e.Shape)
		}
		numel *= d
		shape[i] = int(d)
	}
	want, err := dt.ByteSize(numel)
	if err != nil {
		return TensorInfo{}, formatErr(name, key, "shape %v: %v", *e.Shape, err)
	}
	off := *e.DataOffsets
	if len(off) != 2 {
		return TensorInfo{}, formatErr(name, key, "data_offsets has %d values, want 2", len(off))
	}
	begin, end := off[0], off[1]
	dataLen := f.size - f.dataBase
	switch {
	case begin < 0 || end < 0:
		return TensorInfo{}, formatErr(name, key, "negative data_offsets %v", off)
	case end < begin:
		return TensorInfo{}, formatErr(name, key, "data_offsets %v end before they begin", off)
	case end > dataLen:
		return TensorInfo{}, formatErr(name, key, "data_offsets %v run past the end of the data (%d bytes)", off, dataLen)
	case end-begin != want:
		return TensorInfo{}, formatErr(name, key, "data_offsets %v hold %d bytes, want %d for %s %v", off, end-begin, want, dt, *e.Shape)
	}
	return TensorInfo{Name: key, DType: dt, Shape: shape, File: name, Offset: f.dataBase + begin, Size: want}, nil
}
