package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ValueType is the type of a metadata value (gguf.h's enum gguf_type).
type ValueType uint32

// Metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

func (v ValueType) String() string {
	names := [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("value type %d", uint32(v))
}

// scalarSize returns the byte size of a fixed-size value type, 0 for
// string, array and unknown types.
func (v ValueType) scalarSize() int {
	switch v {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize returns the fewest bytes one value of type v occupies in a file:
// what bounds an element count before anything is allocated.
func (v ValueType) minSize() int64 {
	switch v {
	case TypeString:
		return 8 // length
	case TypeArray:
		return 12 // element type + count
	}
	return int64(v.scalarSize())
}

// Value is one metadata value. Scalars keep their bits, strings their
// bytes; an array keeps its element type and, compactly, its elements:
// fixed-size elements as their little-endian bytes, strings as a slice,
// nested arrays as Values.
type Value struct {
	Type ValueType
	bits uint64 // scalar value (sign-extended for signed, float bits)
	str  string
	arr  *Array
}

// Array is an array value.
type Array struct {
	Elem  ValueType
	Len   int
	raw   []byte   // fixed-size elements
	strs  []string // TypeString elements
	elems []Value  // TypeArray elements
}

// Uint returns an unsigned or non-negative signed integer value.
func (v Value) Uint() (uint64, bool) {
	switch v.Type {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return v.bits, true
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		if int64(v.bits) >= 0 {
			return v.bits, true
		}
	}
	return 0, false
}

// Int returns an integer value that fits an int64.
func (v Value) Int() (int64, bool) {
	switch v.Type {
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return int64(v.bits), true
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		if v.bits <= math.MaxInt64 {
			return int64(v.bits), true
		}
	}
	return 0, false
}

// Float returns a float32 or float64 value as float64 (exactly).
func (v Value) Float() (float64, bool) {
	switch v.Type {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) { return v.bits != 0, v.Type == TypeBool }

// Str returns a string value.
func (v Value) Str() (string, bool) { return v.str, v.Type == TypeString }

// Array returns an array value.
func (v Value) Array() (*Array, bool) { return v.arr, v.Type == TypeArray && v.arr != nil }

// Strings returns the elements of a string array.
func (a *Array) Strings() ([]string, bool) {
	if a.Elem != TypeString {
		return nil, false
	}
	return a.strs, true
}

// At returns element i as a Value.
func (a *Array) At(i int) Value {
	switch a.Elem {
	case TypeString:
		return Value{Type: TypeString, str: a.strs[i]}
	case TypeArray:
		return a.elems[i]
	}
	n := a.Elem.scalarSize()
	return Value{Type: a.Elem, bits: scalarBits(a.Elem, a.raw[i*n:(i+1)*n])}
}

// scalarBits reads a little-endian scalar, sign-extending signed integers.
func scalarBits(t ValueType, b []byte) uint64 {
	le := binary.LittleEndian
	switch t {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(le.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(le.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(le.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(le.Uint32(b))))
	}
	return le.Uint64(b)
}

// String formats a value for messages and qppl inspect (arrays are
// summarised by type and length).
func (v Value) String() string {
	switch v.Type {
	case TypeString:
		if len(v.str) > 80 {
			return fmt.Sprintf("%q…", v.str[:80])
		}
		return fmt.Sprintf("%q", v.str)
	case TypeArray:
		if v.arr == nil {
			return "[]"
		}
		return fmt.Sprintf("[%d × %s]", v.arr.Len, v.arr.Elem)
	case TypeBool:
		return fmt.Sprint(v.bits != 0)
	case TypeFloat32, TypeFloat64:
		f, _ := v.Float()
		return fmt.Sprint(f)
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return fmt.Sprint(int64(v.bits))
	}
	return fmt.Sprint(v.bits)
}
