package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Constructors of metadata values, for writing files.

// Uint32Value returns a uint32 value.
func Uint32Value(v uint32) Value { return Value{Type: TypeUint32, bits: uint64(v)} }

// Int32Value returns an int32 value.
func Int32Value(v int32) Value { return Value{Type: TypeInt32, bits: uint64(int64(v))} }

// Uint64Value returns a uint64 value.
func Uint64Value(v uint64) Value { return Value{Type: TypeUint64, bits: v} }

// Uint16Value returns a uint16 value.
func Uint16Value(v uint16) Value { return Value{Type: TypeUint16, bits: uint64(v)} }

// Float32Value returns a float32 value.
func Float32Value(v float32) Value {
	return Value{Type: TypeFloat32, bits: uint64(math.Float32bits(v))}
}

// Float64Value returns a float64 value.
func Float64Value(v float64) Value { return Value{Type: TypeFloat64, bits: math.Float64bits(v)} }

// BoolValue returns a bool value.
func BoolValue(v bool) Value {
	if v {
		return Value{Type: TypeBool, bits: 1}
	}
	return Value{Type: TypeBool}
}

// StringValue returns a string value.
func StringValue(s string) Value { return Value{Type: TypeString, str: s} }

// StringArray returns an array of strings.
func StringArray(ss []string) Value {
	return Value{Type: TypeArray, arr: &Array{Elem: TypeString, Len: len(ss), strs: ss}}
}

// ScalarArray returns an array of fixed-size elements of type t from their
// little-endian bytes.
func ScalarArray(t ValueType, raw []byte) (Value, error) {
	n := t.scalarSize()
	if n == 0 || len(raw)%n != 0 {
		return Value{}, fmt.Errorf("gguf: %d bytes are not an array of %s", len(raw), t)
	}
	return Value{Type: TypeArray, arr: &Array{Elem: t, Len: len(raw) / n, raw: raw}}, nil
}

// Float32Array returns an array of float32.
func Float32Array(v []float32) Value {
	raw := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return Value{Type: TypeArray, arr: &Array{Elem: TypeFloat32, Len: len(v), raw: raw}}
}

// Int32Array returns an array of int32.
func Int32Array(v []int32) Value {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(x))
	}
	return Value{Type: TypeArray, arr: &Array{Elem: TypeInt32, Len: len(v), raw: raw}}
}

// ArrayOf returns an array of arrays.
func ArrayOf(elems []Value) Value {
	return Value{Type: TypeArray, arr: &Array{Elem: TypeArray, Len: len(elems), elems: elems}}
}

// WriteTensor is one tensor to write: its ggml dims (ne, innermost first),
// type, and data (exactly ggml.RowBytes(Type, numel) bytes).
type WriteTensor struct {
	Name string
	Dims []int64
	Type Type
	Data []byte
}

// Write writes a GGUF v3 file: the key/values in order (general.alignment,
// when present, must be a uint32 power of two; DefaultAlignment otherwise),
// the tensor infos, then the tensor data, each tensor at an aligned offset.
func Write(w io.Writer, kvs []KV, tensors []WriteTensor) error {
	align := int64(DefaultAlignment)
	for _, kv := range kvs {
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.Uint()
			if !ok || kv.Value.Type != TypeUint32 || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("gguf: general.alignment %v must be a power of two uint32", kv.Value)
			}
			align = int64(a)
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var pos int64
	put := func(b []byte) {
		bw.Write(b)
		pos += int64(len(b))
	}
	u32 := func(v uint32) { put(binary.LittleEndian.AppendUint32(nil, v)) }
	u64 := func(v uint64) { put(binary.LittleEndian.AppendUint64(nil, v)) }
	str := func(s string) { u64(uint64(len(s))); put([]byte(s)) }
	var value func(v Value) error
	value = func(v Value) error {
		switch v.Type {
		case TypeString:
			str(v.str)
		case TypeArray:
			a := v.arr
			if a == nil {
				a = &Array{Elem: TypeUint8}
			}
			u32(uint32(a.Elem))
			u64(uint64(a.Len))
			switch a.Elem {
			case TypeString:
				for _, s := range a.strs {
					str(s)
				}
			case TypeArray:
				for _, e := range a.elems {
					if e.Type != TypeArray {
						return fmt.Errorf("gguf: array of arrays holds a %s", e.Type)
					}
					if err := value(e); err != nil {
						return err
					}
				}
			default:
				put(a.raw)
			}
		default:
			n := v.Type.scalarSize()
			if n == 0 {
				return fmt.Errorf("gguf: cannot write value type %s", v.Type)
			}
			put(binary.LittleEndian.AppendUint64(nil, v.bits)[:n])
		}
		return nil
	}
	u32(magic)
	u32(3)
	u64(uint64(len(tensors)))
	u64(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.Key)
		u32(uint32(kv.Value.Type))
		if err := value(kv.Value); err != nil {
			return fmt.Errorf("gguf: writing %s: %w", kv.Key, err)
		}
	}
	var off int64
	for _, t := range tensors {
		n := int64(1)
		for _, d := range t.Dims {
			n *= d
		}
		size, err := rowBytes(t.Type, n)
		if err != nil {
			return fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		if int64(len(t.Data)) != size {
			return fmt.Errorf("gguf: tensor %s: %d bytes of data, want %d", t.Name, len(t.Data), size)
		}
		str(t.Name)
		u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			u64(uint64(d))
		}
		u32(uint32(t.Type))
		u64(uint64(off))
		off += size
		off += (align - off%align) % align
	}
	pad := func() { put(make([]byte, (align-pos%align)%align)) }
	pad()
	for _, t := range tensors {
		put(t.Data)
		pad()
	}
	return bw.Flush()
}
