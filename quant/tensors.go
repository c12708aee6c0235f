package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/qppl/qppl/checkpoint"
)

// tensors is a module-scoped tensor reader with errors naming file and tensor.
type tensors struct {
	src    Source
	module string
}

func (t tensors) has(suffix string) bool {
	_, ok := t.src.Tensor(t.module + "." + suffix)
	return ok
}

func (t tensors) errf(ti checkpoint.TensorInfo, f string, a ...any) error {
	file := ti.File
	if file == "" {
		file = "checkpoint"
	}
	return fmt.Errorf("%s: tensor %s: %s", file, ti.Name, fmt.Sprintf(f, a...))
}

// file names the file holding the module's weight, for errors about a
// tensor that is absent.
func (t tensors) file() string {
	info := t.src.Tensor
	if pk, ok := t.src.(peeker); ok {
		info = pk.Peek
	}
	for _, s := range []string{"weight", "weight_packed", "qweight"} {
		if ti, ok := info(t.module + "." + s); ok && ti.File != "" {
			return ti.File
		}
	}
	return "checkpoint"
}

// get returns the tensor module.suffix, checking its dtype against dtypes
// (any when empty) and its rank.
func (t tensors) get(suffix string, dtypes ...string) (checkpoint.TensorInfo, error) {
	name := t.module + "." + suffix
	ti, ok := t.src.Tensor(name)
	if !ok {
		return ti, fmt.Errorf("%s: module %s: missing tensor %s", t.file(), t.module, name)
	}
	if len(dtypes) > 0 {
		okd := false
		for _, d := range dtypes {
			if string(ti.DType) == d {
				okd = true
			}
		}
		if !okd {
			return ti, t.errf(ti, "dtype %s, want %s", ti.DType, strings.Join(dtypes, " or "))
		}
	}
	return ti, nil
}

func (t tensors) raw(ti checkpoint.TensorInfo) ([]byte, error) {
	n := numel(ti.Shape)
	sz := int64(dtypeSize(string(ti.DType)))
	if n < 0 || sz == 0 || n*sz != ti.Size && ti.Size != 0 || n*sz > 1<<40 {
		return nil, t.errf(ti, "size %d bytes does not match dtype %s shape %v", ti.Size, ti.DType, ti.Shape)
	}
	b, err := t.src.ReadRaw(ti.Name)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", t.module, err)
	}
	if int64(len(b)) != n*sz {
		return nil, t.errf(ti, "read %d bytes, want %d", len(b), n*sz)
	}
	return b, nil
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > (1<<50)/int64(d)) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

func (t tensors) shape(ti checkpoint.TensorInfo, want ...int) error {
	if len(ti.Shape) != len(want) {
		return t.errf(ti, "shape %v, want %v", ti.Shape, want)
	}
	for i := range want {
		if ti.Shape[i] != want[i] {
			return t.errf(ti, "shape %v, want %v", ti.Shape, want)
		}
	}
	return nil
}

// floats reads a float tensor exactly.
func (t tensors) floats(ti checkpoint.TensorInfo) ([]float64, error) {
	b, err := t.raw(ti)
	if err != nil {
		return nil, err
	}
	v, ok := decodeFloats(string(ti.DType), b)
	if !ok {
		return nil, t.errf(ti, "dtype %s is not a float dtype", ti.DType)
	}
	return v, nil
}

// scales reads a scale tensor and checks every value is finite and > 0.
func (t tensors) scales(ti checkpoint.TensorInfo) ([]float64, error) {
	v, err := t.floats(ti)
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 {
			return nil, t.errf(ti, "element %d is %v: scales must be finite and > 0", i, x)
		}
	}
	return v, nil
}

func (t tensors) ints(ti checkpoint.TensorInfo) ([]int64, error) {
	b, err := t.raw(ti)
	if err != nil {
		return nil, err
	}
	v, ok := decodeInts(string(ti.DType), b)
	if !ok {
		return nil, t.errf(ti, "dtype %s is not an integer dtype", ti.DType)
	}
	return v, nil
}

// words reads a tensor of 32-bit words (packed codes). I32 tensors are
// viewed in place (le32), so loading a packed checkpoint leaves no copy of
// its bytes behind for the garbage collector: the peak memory stays near
// the packed size.
func (t tensors) words(ti checkpoint.TensorInfo) ([]uint32, error) {
	if ti.DType == "I32" {
		b, err := t.raw(ti)
		if err != nil {
			return nil, err
		}
		return le32(b), nil
	}
	v, err := t.ints(ti)
	if err != nil {
		return nil, err
	}
	w := make([]uint32, len(v))
	for i, x := range v {
		w[i] = uint32(x)
	}
	return w, nil
}

// storedBytes sums the sizes of every tensor under module except its bias.
func storedBytes(src Source, module string) int64 {
	var n int64
	p := module + "."
	info := src.Tensor
	if pk, ok := src.(peeker); ok {
		info = pk.Peek
	}
	for _, name := range src.Names() {
		if strings.HasPrefix(name, p) && !strings.Contains(name[len(p):], ".") && name != p+"bias" {
			if ti, ok := info(name); ok {
				n += ti.Size
			}
		}
	}
	return n
}

// checkGIdx validates g_idx (formats.md §7 item 4): -1 anywhere means
// absent (nil); otherwise values in [0, G) and every group has exactly gs
// members (the last group in-(G-1)*gs).
func checkGIdx(gv []int64, in, gs, groups int) ([]int32, error) {
	for _, v := range gv {
		if v == -1 {
			return nil, nil
		}
	}
	count := make([]int, groups)
	out := make([]int32, in)
	for c, v := range gv {
		if v < 0 || v >= int64(groups) {
			return nil, fmt.Errorf("g_idx[%d] = %d out of range [0, %d)", c, v, groups)
		}
		count[v]++
		out[c] = int32(v)
	}
	for g, n := range count {
		want := gs
		if g == groups-1 {
			want = in - (groups-1)*gs
		}
		if n != want {
			return nil, fmt.Errorf("g_idx: group %d has %d members, want %d", g, n, want)
		}
	}
	return out, nil
}

// readPacked reads the tensors GPTQ and AWQ share: the qweight words (qti,
// shape already checked), qzeros I32 [groups, zeroCols] and scales
// F16/BF16/F32 [groups, out].
func readPacked(t tensors, qti checkpoint.TensorInfo, groups, zeroCols, out int) (qweight, qzeros []uint32, scales []float64, scaleDType string, err error) {
	zti, err := t.get("qzeros", "I32")
	if err != nil {
		return nil, nil, nil, "", err
	}
	if err := t.shape(zti, groups, zeroCols); err != nil {
		return nil, nil, nil, "", err
	}
	sti, err := t.get("scales", "F16", "BF16", "F32")
	if err != nil {
		return nil, nil, nil, "", err
	}
	if err := t.shape(sti, groups, out); err != nil {
		return nil, nil, nil, "", err
	}
	if qweight, err = t.words(qti); err != nil {
		return nil, nil, nil, "", err
	}
	if qzeros, err = t.words(zti); err != nil {
		return nil, nil, nil, "", err
	}
	if scales, err = t.scales(sti); err != nil {
		return nil, nil, nil, "", err
	}
	return qweight, qzeros, scales, string(sti.DType), nil
}

// matrix reads the 2-D [out, in] tensor module.suffix, of one of dtypes,
// as raw bytes.
func (t tensors) matrix(suffix string, dtypes ...string) (ti checkpoint.TensorInfo, raw []byte, err error) {
	if ti, err = t.get(suffix, dtypes...); err != nil {
		return ti, nil, err
	}
	if len(ti.Shape) != 2 {
		return ti, nil, t.errf(ti, "shape %v, want [out, in]", ti.Shape)
	}
	raw, err = t.raw(ti)
	return ti, raw, err
}

// peeker is a Source that describes a tensor without marking it as used
// (checkpoint.Model.Peek), so that accounting does not hide a tensor no
// decoder reads from the unused-tensor check.
type peeker interface {
	Peek(name string) (checkpoint.TensorInfo, bool)
}

// le32 returns b's little-endian 32-bit words: b itself seen as []uint32
// when the machine is little-endian and b is 4-byte aligned (Go's
// allocator aligns every buffer of 8 bytes or more), else a decoded copy.
func le32(b []byte) []uint32 {
	n := len(b) / 4
	if n == 0 {
		return []uint32{}
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 == 0 && binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		return unsafe.Slice((*uint32)(p), n)
	}
	w := make([]uint32, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}
