package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// ReadArrowColumn reads the top-level string column col of an Apache Arrow
// IPC file, in the streaming format the Hugging Face datasets library writes
// to its cache (<HF_DATASETS_CACHE>/.../wikitext-test.arrow) or in the file
// format ("ARROW1"). Flat schemas of primitive, boolean, binary and string
// columns are supported; the column must be Utf8 or LargeUtf8 without nulls,
// and the body uncompressed. Every offset and length read from the file is
// checked against the file before use.
func ReadArrowColumn(path, col string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	rows, err := parseArrowColumn(data, col)
	if err != nil {
		return nil, fmt.Errorf("dataset: arrow %s: %w", path, err)
	}
	return rows, nil
}

var errArrowBounds = errors.New("truncated or corrupt (offset out of bounds)")

// fbTable is a flatbuffers table inside buf.
type fbTable struct {
	buf []byte
	pos int
	vt  int // vtable position
	vtn int // vtable size in bytes
}

func u16(b []byte, p int) (int, bool) {
	if p < 0 || p+2 > len(b) {
		return 0, false
	}
	return int(binary.LittleEndian.Uint16(b[p:])), true
}

func u32(b []byte, p int) (uint32, bool) {
	if p < 0 || p+4 > len(b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[p:]), true
}

func i64(b []byte, p int) (int64, bool) {
	if p < 0 || p+8 > len(b) {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(b[p:])), true
}

func fbTableAt(buf []byte, pos int) (fbTable, error) {
	so, ok := u32(buf, pos)
	if !ok {
		return fbTable{}, errArrowBounds
	}
	vt := pos - int(int32(so))
	n, ok := u16(buf, vt)
	if !ok || n < 4 || n%2 != 0 || vt+n > len(buf) {
		return fbTable{}, errArrowBounds
	}
	return fbTable{buf: buf, pos: pos, vt: vt, vtn: n}, nil
}

func fbRoot(buf []byte) (fbTable, error) {
	off, ok := u32(buf, 0)
	if !ok {
		return fbTable{}, errArrowBounds
	}
	return fbTableAt(buf, int(off))
}

// field returns the absolute position of field id, or 0 when absent.
func (t fbTable) field(id int) int {
	p := 4 + 2*id
	if p+2 > t.vtn {
		return 0
	}
	o, _ := u16(t.buf, t.vt+p)
	if o == 0 {
		return 0
	}
	return t.pos + o
}

func (t fbTable) u8(id int, def int) (int, error) {
	p := t.field(id)
	if p == 0 {
		return def, nil
	}
	if p >= len(t.buf) {
		return 0, errArrowBounds
	}
	return int(t.buf[p]), nil
}

func (t fbTable) i16(id int, def int) (int, error) {
	p := t.field(id)
	if p == 0 {
		return def, nil
	}
	v, ok := u16(t.buf, p)
	if !ok {
		return 0, errArrowBounds
	}
	return int(int16(v)), nil
}

func (t fbTable) i64(id int, def int64) (int64, error) {
	p := t.field(id)
	if p == 0 {
		return def, nil
	}
	v, ok := i64(t.buf, p)
	if !ok {
		return 0, errArrowBounds
	}
	return v, nil
}

// ref follows the offset stored in field id; ok is false when absent.
func (t fbTable) ref(id int) (int, bool, error) {
	p := t.field(id)
	if p == 0 {
		return 0, false, nil
	}
	o, ok := u32(t.buf, p)
	if !ok || p+int(o) >= len(t.buf) {
		return 0, false, errArrowBounds
	}
	return p + int(o), true, nil
}

func (t fbTable) table(id int) (fbTable, bool, error) {
	p, ok, err := t.ref(id)
	if err != nil || !ok {
		return fbTable{}, ok, err
	}
	tt, err := fbTableAt(t.buf, p)
	return tt, err == nil, err
}

// vector returns the element start and count of the vector in field id.
func (t fbTable) vector(id, elemSize int) (start, n int, err error) {
	p, ok, err := t.ref(id)
	if err != nil || !ok {
		return 0, 0, err
	}
	c, ok2 := u32(t.buf, p)
	if !ok2 || int64(p)+4+int64(c)*int64(elemSize) > int64(len(t.buf)) {
		return 0, 0, errArrowBounds
	}
	return p + 4, int(c), nil
}

func (t fbTable) str(id int) (string, error) {
	s, n, err := t.vector(id, 1)
	if err != nil {
		return "", err
	}
	return string(t.buf[s : s+n]), nil
}

// Arrow Type union tags (Schema.fbs) and their buffer counts in a flat
// record batch (validity first).
const (
	arrowNull       = 1
	arrowInt        = 2
	arrowFloat      = 3
	arrowBinary     = 4
	arrowUtf8       = 5
	arrowBool       = 6
	arrowDecimal    = 7
	arrowDate       = 8
	arrowTime       = 9
	arrowTimestamp  = 10
	arrowInterval   = 11
	arrowFixedBin   = 15
	arrowDuration   = 18
	arrowLargeBin   = 19
	arrowLargeUtf8  = 20
	msgSchema       = 1
	msgDictionary   = 2
	msgRecordBatch  = 3
	arrowMaxMsgSize = 1 << 30
)

func arrowBuffers(typ int) (int, bool) {
	switch typ {
	case arrowNull:
		return 0, true
	case arrowInt, arrowFloat, arrowBool, arrowDecimal, arrowDate, arrowTime, arrowTimestamp, arrowInterval, arrowFixedBin, arrowDuration:
		return 2, true
	case arrowBinary, arrowUtf8, arrowLargeBin, arrowLargeUtf8:
		return 3, true
	}
	return 0, false
}

type arrowColumn struct {
	index      int // field index = FieldNode index
	bufFirst   int // index of its validity buffer
	large      bool
	numFields  int
	numBuffers int
}

func parseArrowSchema(t fbTable, col string) (arrowColumn, error) {
	if e, err := t.i16(0, 0); err != nil {
		return arrowColumn{}, err
	} else if e != 0 {
		return arrowColumn{}, errors.New("big-endian Arrow data is not supported")
	}
	start, n, err := t.vector(1, 4)
	if err != nil {
		return arrowColumn{}, err
	}
	c := arrowColumn{index: -1, numFields: n}
	var names []string
	for i := 0; i < n; i++ {
		p := start + 4*i
		o, _ := u32(t.buf, p)
		f, err := fbTableAt(t.buf, p+int(o))
		if err != nil {
			return c, err
		}
		name, err := f.str(0)
		if err != nil {
			return c, err
		}
		names = append(names, name)
		typ, err := f.u8(2, 0)
		if err != nil {
			return c, err
		}
		if _, hasDict, err := f.ref(4); err != nil {
			return c, err
		} else if hasDict {
			return c, fmt.Errorf("field %q is dictionary-encoded (not supported)", name)
		}
		if _, kids, err := f.vector(5, 4); err != nil {
			return c, err
		} else if kids > 0 {
			return c, fmt.Errorf("field %q is nested (not supported)", name)
		}
		nb, ok := arrowBuffers(typ)
		if !ok {
			return c, fmt.Errorf("field %q has Arrow type %d (not supported)", name, typ)
		}
		if name == col && c.index < 0 {
			if typ != arrowUtf8 && typ != arrowLargeUtf8 {
				return c, fmt.Errorf("column %q is not a string column (Arrow type %d)", col, typ)
			}
			c.index, c.bufFirst, c.large = i, c.numBuffers, typ == arrowLargeUtf8
		}
		c.numBuffers += nb
	}
	if c.index < 0 {
		return c, fmt.Errorf("no column %q (columns: %v)", col, names)
	}
	return c, nil
}

func parseArrowColumn(data []byte, col string) ([]string, error) {
	pos := 0
	var c arrowColumn
	haveSchema, fileFormat := false, false
	if len(data) >= 8 && string(data[:6]) == "ARROW1" {
		// File format: magic, padding, the stream (whose schema message
		// some writers omit), the footer, its int32 size, magic. The
		// footer's schema is authoritative.
		fileFormat = true
		pos = 8
		if len(data) < 8+10 || string(data[len(data)-6:]) != "ARROW1" {
			return nil, errors.New("truncated Arrow file (no trailing ARROW1 magic)")
		}
		fs, _ := u32(data, len(data)-10)
		if int64(fs) > int64(len(data)-18) {
			return nil, fmt.Errorf("footer of %d bytes does not fit in the file", fs)
		}
		footer, err := fbRoot(data[len(data)-10-int(fs) : len(data)-10])
		if err != nil {
			return nil, fmt.Errorf("footer: %w", err)
		}
		schema, ok, err := footer.table(1)
		if err != nil || !ok {
			return nil, fmt.Errorf("footer without a schema (%v)", err)
		}
		if c, err = parseArrowSchema(schema, col); err != nil {
			return nil, err
		}
		haveSchema = true
	}
	var rows []string
	batch := 0
	for {
		n, ok := u32(data, pos)
		if !ok {
			return nil, errors.New("truncated: no end-of-stream marker")
		}
		pos += 4
		if n == 0xFFFFFFFF { // continuation marker (format >= 0.15)
			if n, ok = u32(data, pos); !ok {
				return nil, errors.New("truncated: no end-of-stream marker")
			}
			pos += 4
		}
		if n == 0 {
			break // end of stream
		}
		if n > arrowMaxMsgSize || pos+int(n) > len(data) {
			return nil, fmt.Errorf("message of %d bytes at offset %d overruns the file", n, pos-4)
		}
		meta := data[pos : pos+int(n)]
		pos += int(n)
		msg, err := fbRoot(meta)
		if err != nil {
			return nil, fmt.Errorf("message at offset %d: %w", pos-int(n), err)
		}
		kind, err := msg.u8(1, 0)
		if err != nil {
			return nil, err
		}
		bodyLen, err := msg.i64(3, 0)
		if err != nil {
			return nil, err
		}
		if bodyLen < 0 || bodyLen > int64(len(data)-pos) {
			return nil, fmt.Errorf("message body of %d bytes at offset %d overruns the file", bodyLen, pos)
		}
		body := data[pos : pos+int(bodyLen)]
		pos += int(bodyLen)
		header, ok, err := msg.table(2)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.New("message without a header")
		}
		switch kind {
		case msgSchema:
			if fileFormat {
				continue // the footer's schema is already read
			}
			if haveSchema {
				return nil, errors.New("second schema message")
			}
			if c, err = parseArrowSchema(header, col); err != nil {
				return nil, err
			}
			haveSchema = true
		case msgDictionary:
			return nil, errors.New("dictionary batches are not supported")
		case msgRecordBatch:
			if !haveSchema {
				return nil, errors.New("record batch before the schema")
			}
			if rows, err = appendArrowBatch(rows, header, body, c); err != nil {
				return nil, fmt.Errorf("record batch %d: %w", batch, err)
			}
			batch++
		default:
			return nil, fmt.Errorf("unsupported message type %d", kind)
		}
	}
	if !haveSchema {
		return nil, errors.New("no schema message")
	}
	return rows, nil
}

func appendArrowBatch(rows []string, rb fbTable, body []byte, c arrowColumn) ([]string, error) {
	length, err := rb.i64(0, 0)
	if err != nil {
		return nil, err
	}
	if _, ok, err := rb.ref(3); err != nil {
		return nil, err
	} else if ok {
		return nil, errors.New("compressed record batches are not supported")
	}
	ns, nn, err := rb.vector(1, 16)
	if err != nil {
		return nil, err
	}
	bs, nb, err := rb.vector(2, 16)
	if err != nil {
		return nil, err
	}
	if nn != c.numFields || nb != c.numBuffers {
		return nil, fmt.Errorf("%d field nodes and %d buffers for a schema of %d fields and %d buffers", nn, nb, c.numFields, c.numBuffers)
	}
	nodeLen, _ := i64(rb.buf, ns+16*c.index)
	nulls, _ := i64(rb.buf, ns+16*c.index+8)
	if nodeLen != length || length < 0 {
		return nil, fmt.Errorf("column length %d, batch length %d", nodeLen, length)
	}
	if nulls != 0 {
		return nil, fmt.Errorf("%d nulls in the text column", nulls)
	}
	buffer := func(i int) ([]byte, error) {
		off, _ := i64(rb.buf, bs+16*i)
		n, _ := i64(rb.buf, bs+16*i+8)
		if off < 0 || n < 0 || off > int64(len(body)) || n > int64(len(body))-off {
			return nil, errArrowBounds
		}
		return body[off : off+n], nil
	}
	offsets, err := buffer(c.bufFirst + 1)
	if err != nil {
		return nil, err
	}
	values, err := buffer(c.bufFirst + 2)
	if err != nil {
		return nil, err
	}
	w := int64(4)
	if c.large {
		w = 8
	}
	// length+1 offsets must fit; divide rather than multiply, as
	// (length+1)*w overflows for lengths read from a hostile file.
	if length > 0 && length >= int64(len(offsets))/w {
		return nil, fmt.Errorf("offsets buffer of %d bytes for %d rows", len(offsets), length)
	}
	at := func(i int64) int64 {
		if c.large {
			return int64(binary.LittleEndian.Uint64(offsets[i*8:]))
		}
		return int64(int32(binary.LittleEndian.Uint32(offsets[i*4:])))
	}
	for i := int64(0); i < length; i++ {
		a, b := at(i), at(i+1)
		if a < 0 || b < a || b > int64(len(values)) {
			return nil, fmt.Errorf("row %d: offsets %d..%d outside the %d-byte data buffer", i, a, b, len(values))
		}
		v := values[a:b]
		if off := firstInvalidUTF8(v); off >= 0 {
			return nil, fmt.Errorf("row %d: invalid UTF-8 at byte %d of the value", i, off)
		}
		rows = append(rows, string(v))
	}
	return rows, nil
}
