package quant

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MethodBNB is transformers' bitsandbytes integration (quant_method
// "bitsandbytes"): 4-bit NF4/FP4 with optional double quantization, or
// 8-bit LLM.int8 (docs/formats/bitsandbytes.md).
const MethodBNB = "bitsandbytes"

// BNBConfig is a quant_method "bitsandbytes" config (transformers'
// BitsAndBytesConfig.to_dict).
type BNBConfig struct {
	Bits         int      `json:"bits"`                    // 4 (load_in_4bit) or 8 (load_in_8bit)
	QuantType    string   `json:"quant_type,omitempty"`    // bnb_4bit_quant_type: nf4 or fp4
	DoubleQuant  bool     `json:"double_quant,omitempty"`  // bnb_4bit_use_double_quant (informative: the tensors decide)
	ComputeDType string   `json:"compute_dtype,omitempty"` // bnb_4bit_compute_dtype as a safetensors dtype (F32 when null)
	Threshold    float64  `json:"llm_int8_threshold"`      // LLM.int8 outlier threshold (6.0 by default; 0 = none)
	SkipModules  []string `json:"skip_modules,omitempty"`  // llm_int8_skip_modules (informative: modules are opened by their tensors)
}

// torchDTypeName maps a torch dtype name ("bfloat16", "torch.float16") to
// a safetensors dtype.
func torchDTypeName(s string) (string, bool) {
	switch strings.TrimPrefix(s, "torch.") {
	case "float32", "float":
		return "F32", true
	case "bfloat16":
		return "BF16", true
	case "float16", "half":
		return "F16", true
	}
	return "", false
}

func parseBNB(top map[string]json.RawMessage) (*BNBConfig, error) {
	c := &BNBConfig{}
	flag := func(keys ...string) (bool, error) {
		for _, k := range keys {
			if v, ok := top[k]; ok && !isNull(v) {
				return boolean(top, k, false)
			}
		}
		return false, nil
	}
	four, err := flag("load_in_4bit", "_load_in_4bit")
	if err != nil {
		return nil, err
	}
	eight, err := flag("load_in_8bit", "_load_in_8bit")
	if err != nil {
		return nil, err
	}
	switch {
	case four && eight:
		return nil, fmt.Errorf("load_in_4bit and load_in_8bit are both true")
	case four:
		c.Bits = 4
	case eight:
		c.Bits = 8
	default:
		return nil, fmt.Errorf("bitsandbytes: neither load_in_4bit nor load_in_8bit is true")
	}
	if c.Bits == 4 {
		if c.QuantType, err = str(top, "bnb_4bit_quant_type", "fp4"); err != nil {
			return nil, err
		}
		c.QuantType = strings.ToLower(c.QuantType)
		if c.QuantType != "nf4" && c.QuantType != "fp4" {
			return nil, fmt.Errorf("bnb_4bit_quant_type %q: want nf4 or fp4", c.QuantType)
		}
		if c.DoubleQuant, err = boolean(top, "bnb_4bit_use_double_quant", false); err != nil {
			return nil, err
		}
		cd, err := str(top, "bnb_4bit_compute_dtype", "float32")
		if err != nil {
			return nil, err
		}
		var ok bool
		if c.ComputeDType, ok = torchDTypeName(cd); !ok {
			return nil, fmt.Errorf("bnb_4bit_compute_dtype %q: want float32, bfloat16 or float16", cd)
		}
		storage, err := str(top, "bnb_4bit_quant_storage", "uint8")
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(storage, "torch.") != "uint8" {
			return nil, fmt.Errorf("bnb_4bit_quant_storage %q is not evaluated by qppl yet (uint8 only); nothing was computed", storage)
		}
	} else {
		if v := top["llm_int8_threshold"]; !isNull(v) {
			if err := json.Unmarshal(v, &c.Threshold); err != nil || c.Threshold < 0 || math.IsInf(c.Threshold, 0) {
				return nil, fmt.Errorf("llm_int8_threshold: want a number >= 0, got %s", clip(v))
			}
		} else {
			c.Threshold = 6 // BitsAndBytesConfig's default
		}
		if fp16, err := boolean(top, "llm_int8_has_fp16_weight", false); err != nil {
			return nil, err
		} else if fp16 {
			return nil, fmt.Errorf("llm_int8_has_fp16_weight true (weights kept in fp16 for training) is not evaluated by qppl yet; nothing was computed")
		}
	}
	if v := top["llm_int8_skip_modules"]; !isNull(v) {
		if err := json.Unmarshal(v, &c.SkipModules); err != nil {
			return nil, fmt.Errorf("llm_int8_skip_modules: want a list of strings, got %s", clip(v))
		}
	}
	return c, nil
}

// BNB4Code returns bitsandbytes' 4-bit code table for quant type nf4 or
// fp4, as float32 values: nf4 is nf4_dequantization_lut of csrc/kernels.cu
// (= get_4bit_type("nf4")); fp4 is fp4_dequantization_lut with the sign bit
// 0b1000 (= get_4bit_type("fp4"), the values /12 in float32).
func BNB4Code(quantType string) [16]float32 {
	if quantType == "nf4" {
		return [16]float32{
			-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
			-0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
			0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
			0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
		}
	}
	lut := [8]float32{0, 0.005208333333, 0.66666667, 1, 0.33333333, 0.5, 0.16666667, 0.25}
	var c [16]float32
	for i := range 8 {
		c[i], c[i+8] = lut[i], -lut[i]
	}
	return c
}

// BNB4 is a bitsandbytes 4-bit weight (Params4bit as transformers saves
// it): the [out, in] weight flattened row-major, two codes per byte (the
// high nibble is the even element), one float32 absmax per BlockSize
// elements, or with double quantization one U8 code per block into the
// 256-entry NestedCode with a float32 NestedAbsmax per NestedBlockSize
// blocks plus Offset. Dequantize computes what bitsandbytes' dequantize_4bit
// hands the matmul (MatMul4Bit: dequantize_4bit(B).to(A.dtype)):
//
//	absmax = f32(f32(NestedCode[q] · NestedAbsmax[b/NestedBlockSize]) + Offset)   (nested)
//	W[i]   = rd_C(rd_D(f32(Code[code_i] · absmax[i/BlockSize])))
//
// with D = OutDType (the quant_state's dtype) and C = ComputeDType.
type BNB4 struct {
	Base
	QuantType       string
	Code            [16]float32
	BlockSize       int
	Packed          []byte    // ceil(out*in/2) bytes
	Absmax          []float32 // [blocks] (not nested)
	Nested          bool
	QAbsmax         []byte    // [blocks] (nested)
	NestedAbsmax    []float32 // [ceil(blocks/NestedBlockSize)]
	NestedCode      []float32 // [256]
	NestedBlockSize int
	Offset          float32
	OutDType        string // quant_state dtype D
	ComputeDType    string // dtype C the weight is cast to for the matmul
}

// BlockAbsmax returns block b's absmax as dequantize_4bit uses it.
func (q *BNB4) BlockAbsmax(b int) float32 {
	if !q.Nested {
		return q.Absmax[b]
	}
	// the explicit conversion rounds the product (no fused multiply-add)
	return float32(q.NestedCode[q.QAbsmax[b]]*q.NestedAbsmax[b/q.NestedBlockSize]) + q.Offset
}

// Dequantize implements Linear.
func (q *BNB4) Dequantize(dst []float64) error {
	if err := q.checkDst(dst); err != nil {
		return err
	}
	return q.DequantizeRows(0, q.Out, dst)
}

// DequantizeRows implements RowDequantizer: elements r0·In … r1·In of the
// flattened weight, block by block (a block may cross rows).
func (q *BNB4) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := q.checkRows(r0, r1, dst); err != nil {
		return err
	}
	lo, hi := r0*q.In, r1*q.In
	for b := lo / q.BlockSize; b*q.BlockSize < hi; b++ {
		am := q.BlockAbsmax(b)
		var lut [16]float64
		for c := range lut {
			lut[c] = RoundDType(q.ComputeDType, RoundDType(q.OutDType, float64(q.Code[c]*am)))
		}
		for i := max(lo, b*q.BlockSize); i < min(hi, (b+1)*q.BlockSize); i++ {
			by := q.Packed[i/2]
			if i%2 == 0 {
				dst[i-lo] = lut[by>>4]
			} else {
				dst[i-lo] = lut[by&15]
			}
		}
	}
	return q.checkFiniteRows(r0, dst)
}

// bnbQuantState is the JSON of weight.quant_state.bitsandbytes__<type>
// (QuantState.as_dict(packed=True), bitsandbytes/functional.py).
type bnbQuantState struct {
	QuantType       string   `json:"quant_type"`
	BlockSize       *int     `json:"blocksize"`
	DType           string   `json:"dtype"`
	Shape           []int    `json:"shape"`
	NestedBlockSize *int     `json:"nested_blocksize"`
	NestedDType     string   `json:"nested_dtype"`
	NestedOffset    *float64 `json:"nested_offset"`
}

// bnbBytes is the stored size of a bitsandbytes module: its direct tensors
// (weight, SCB, weight_format) and the weight.* quant_state tensors.
func bnbBytes(t tensors) int64 {
	n := storedBytes(t.src, t.module)
	p := t.module + ".weight."
	info := t.src.Tensor
	if pk, ok := t.src.(peeker); ok {
		info = pk.Peek
	}
	for _, name := range t.src.Names() {
		if strings.HasPrefix(name, p) {
			if ti, ok := info(name); ok {
				n += ti.Size
			}
		}
	}
	return n
}

func (t tensors) f32s(suffix string, n int) ([]float32, error) {
	ti, err := t.get(suffix, "F32")
	if err != nil {
		return nil, err
	}
	if numel(ti.Shape) != int64(n) || len(ti.Shape) != 1 {
		return nil, t.errf(ti, "shape %v, want [%d]", ti.Shape, n)
	}
	v, err := t.floats(ti)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, t.errf(ti, "element %d is %v", i, x)
		}
		out[i] = float32(x)
	}
	return out, nil
}

func openBNB4(s *Scheme, t tensors, c *BNBConfig) (*BNB4, error) {
	key := "weight.quant_state.bitsandbytes__" + c.QuantType
	if !t.has(key) {
		other := "fp4"
		if c.QuantType == "fp4" {
			other = "nf4"
		}
		if t.has("weight.quant_state.bitsandbytes__" + other) {
			return nil, fmt.Errorf("%s: module %s: has %s.weight.quant_state.bitsandbytes__%s but quantization_config.bnb_4bit_quant_type is %s", t.file(), t.module, t.module, other, c.QuantType)
		}
	}
	qti, err := t.get(key, "U8")
	if err != nil {
		return nil, err
	}
	raw, err := t.raw(qti)
	if err != nil {
		return nil, err
	}
	var qs bnbQuantState
	if err := json.Unmarshal(raw, &qs); err != nil {
		return nil, t.errf(qti, "not a quant_state JSON object: %v", err)
	}
	if qs.QuantType != c.QuantType {
		return nil, t.errf(qti, "quant_type %q, want %q (bnb_4bit_quant_type)", qs.QuantType, c.QuantType)
	}
	if qs.BlockSize == nil {
		return nil, t.errf(qti, "blocksize missing")
	}
	bs := *qs.BlockSize
	switch bs {
	case 32, 64, 128, 256, 512, 1024, 2048, 4096:
	default:
		return nil, t.errf(qti, "blocksize %d: want a power of two in 32..4096", bs)
	}
	od, ok := torchDTypeName(qs.DType)
	if !ok {
		return nil, t.errf(qti, "dtype %q: want float32, bfloat16 or float16", qs.DType)
	}
	if len(qs.Shape) != 2 || qs.Shape[0] <= 0 || qs.Shape[1] <= 0 || qs.Shape[0] > 1<<24 || qs.Shape[1] > 1<<24 {
		return nil, t.errf(qti, "shape %v: want [out, in]", qs.Shape)
	}
	out, in := qs.Shape[0], qs.Shape[1]
	n := out * in
	wti, err := t.get("weight", "U8")
	if err != nil {
		return nil, err
	}
	if numel(wti.Shape) != int64((n+1)/2) {
		return nil, t.errf(wti, "shape %v holds %d bytes, want %d for quant_state shape %v", wti.Shape, numel(wti.Shape), (n+1)/2, qs.Shape)
	}
	q := &BNB4{QuantType: c.QuantType, Code: BNB4Code(c.QuantType), BlockSize: bs, OutDType: od}
	if q.Packed, err = t.raw(wti); err != nil {
		return nil, err
	}
	// The code table bitsandbytes' kernels use is built in; the stored
	// quant_map must be that table (CUDA's dequantize ignores it).
	qm, err := t.f32s("weight.quant_map", 16)
	if err != nil {
		return nil, err
	}
	for i, v := range qm {
		if v != q.Code[i] {
			mti, _ := t.get("weight.quant_map")
			return nil, t.errf(mti, "element %d is %v, bitsandbytes' %s table has %v (its kernels use the built-in table)", i, v, c.QuantType, q.Code[i])
		}
	}
	blocks := (n + bs - 1) / bs
	if t.has("weight.nested_absmax") {
		q.Nested = true
		if qs.NestedBlockSize == nil || qs.NestedOffset == nil {
			return nil, t.errf(qti, "nested_blocksize and nested_offset are required with weight.nested_absmax")
		}
		q.NestedBlockSize = *qs.NestedBlockSize
		if nb := q.NestedBlockSize; nb < 64 || nb > 4096 || nb&(nb-1) != 0 {
			return nil, t.errf(qti, "nested_blocksize %d: want a power of two in 64..4096 (quantize_blockwise's sizes)", nb)
		}
		if qs.NestedDType != "float32" {
			return nil, t.errf(qti, "nested_dtype %q, want float32", qs.NestedDType)
		}
		q.Offset = float32(*qs.NestedOffset)
		ati, err := t.get("weight.absmax", "U8")
		if err != nil {
			return nil, err
		}
		if err := t.shape(ati, blocks); err != nil {
			return nil, err
		}
		if q.QAbsmax, err = t.raw(ati); err != nil {
			return nil, err
		}
		if q.NestedAbsmax, err = t.f32s("weight.nested_absmax", (blocks+q.NestedBlockSize-1)/q.NestedBlockSize); err != nil {
			return nil, err
		}
		if q.NestedCode, err = t.f32s("weight.nested_quant_map", 256); err != nil {
			return nil, err
		}
	} else {
		if t.has("weight.nested_quant_map") {
			ti, _ := t.get("weight.nested_quant_map")
			return nil, t.errf(ti, "present without weight.nested_absmax")
		}
		if q.Absmax, err = t.f32s("weight.absmax", blocks); err != nil {
			return nil, err
		}
	}
	// MatMul4Bit casts the dequantized weight to the input dtype, which
	// Linear4bit.set_compute_type makes the activation dtype for float32
	// and bfloat16 inputs and bnb_4bit_compute_dtype for float16 ones.
	q.ComputeDType = s.ModelDType
	if s.ModelDType == "F16" {
		q.ComputeDType = c.ComputeDType
	}
	dq := ""
	if q.Nested {
		dq = "-dq"
	}
	q.Base = Base{Out: out, In: in, FileName: wti.File, Fmt: fmt.Sprintf("bnb-%s%s-b%d", c.QuantType, dq, bs)}
	q.Name, q.Bytes = t.module, bnbBytes(t)
	return q, nil
}

// BNB8 is a bitsandbytes LLM.int8 weight (Int8Params, row-major):
// W[o,i] = Codes[o,i] · SCB[o] / 127 in float64 (int8_vectorwise_dequant's
// value; bitsandbytes never materialises it in the int8 matmul). Its input
// quantizer is the LLM.int8 decomposition (ActLLMInt8).
type BNB8 struct {
	Base
	Codes []int8
	SCB   []float64 // [out] float32 row absmax values
}

// Dequantize implements Linear.
func (q *BNB8) Dequantize(dst []float64) error {
	if err := q.checkDst(dst); err != nil {
		return err
	}
	return q.DequantizeRows(0, q.Out, dst)
}

// DequantizeRows implements RowDequantizer.
func (q *BNB8) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := q.checkRows(r0, r1, dst); err != nil {
		return err
	}
	for o := r0; o < r1; o++ {
		s := q.SCB[o]
		d := dst[(o-r0)*q.In : (o-r0+1)*q.In]
		for i, c := range q.Codes[o*q.In : (o+1)*q.In] {
			d[i] = float64(c) * s / 127
		}
	}
	return q.checkFiniteRows(r0, dst)
}

func openBNB8(t tensors, c *BNBConfig) (*BNB8, error) {
	wti, err := t.get("weight", "I8")
	if err != nil {
		return nil, err
	}
	if len(wti.Shape) != 2 || wti.Shape[0] == 0 || wti.Shape[1] == 0 {
		return nil, t.errf(wti, "shape %v, want [out, in]", wti.Shape)
	}
	out, in := wti.Shape[0], wti.Shape[1]
	sti, err := t.get("SCB", "F32")
	if err != nil {
		return nil, err
	}
	if err := t.shape(sti, out); err != nil {
		return nil, err
	}
	scb, err := t.floats(sti)
	if err != nil {
		return nil, err
	}
	for i, v := range scb {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, t.errf(sti, "element %d is %v: row scales must be finite and >= 0", i, v)
		}
	}
	if t.has("weight_format") {
		fti, err := t.get("weight_format", "U8", "I64", "I32")
		if err != nil {
			return nil, err
		}
		if numel(fti.Shape) != 1 {
			return nil, t.errf(fti, "shape %v, want []", fti.Shape)
		}
		v, err := t.ints(fti)
		if err != nil {
			return nil, err
		}
		if v[0] != 0 {
			return nil, t.errf(fti, "value %d: only 0 (row-major) is what bitsandbytes loads", v[0])
		}
	}
	raw, err := t.raw(wti)
	if err != nil {
		return nil, err
	}
	q := &BNB8{SCB: scb, Codes: make([]int8, len(raw))}
	for i, b := range raw {
		q.Codes[i] = int8(b)
	}
	q.Base = Base{Out: out, In: in, FileName: wti.File, Fmt: "bnb-int8"}
	q.Act = &ActQuant{Kind: ActLLMInt8, Bits: 8, Strategy: "token", Dynamic: true, Symmetric: true, Threshold: c.Threshold}
	q.Fmt += "+" + q.Act.describe()
	q.Name, q.Bytes = t.module, bnbBytes(t)
	return q, nil
}

// llmInt8 is LLM.int8's input side (MatMul8bitLt with threshold t, in the
// float64 rule): a column is an outlier when some row of x has |x| >= t
// (t > 0); outlier columns stay as they are (bitsandbytes multiplies them
// with the dequantized weight columns); every other element becomes
// RNE(x / s) · s with s = amax/127, amax the row's largest |x| over the
// non-outlier columns (int8_vectorwise_quant).
func (a *ActQuant) llmInt8(x []float64, rows, cols int) {
	outlier := make([]bool, cols)
	if a.Threshold > 0 {
		for r := 0; r < rows; r++ {
			for c, v := range x[r*cols : (r+1)*cols] {
				if math.Abs(v) >= a.Threshold {
					outlier[c] = true
				}
			}
		}
	}
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		amax := 0.0
		for c, v := range row {
			if !outlier[c] {
				amax = math.Max(amax, math.Abs(v))
			}
		}
		s := amax / 127
		for c, v := range row {
			switch {
			case outlier[c]:
			case s == 0:
				row[c] = 0
			default:
				row[c] = math.RoundToEven(v/s) * s
			}
		}
	}
}

func bnbFamily() family {
	return family{
		name:   "bitsandbytes",
		method: MethodBNB,
		parse: func(s *Scheme, top map[string]json.RawMessage) (err error) {
			s.BNB, err = parseBNB(top)
			return err
		},
		markers: []string{"weight.absmax", "SCB"},
		open: func(s *Scheme, t tensors, _ *Group) (Linear, error) {
			if s.BNB.Bits == 8 {
				if !t.has("SCB") {
					return nil, fmt.Errorf("%s: module %s: load_in_8bit but no %s.SCB", t.file(), t.module, t.module)
				}
				return openBNB8(t, s.BNB)
			}
			if !t.has("weight.absmax") {
				return nil, fmt.Errorf("%s: module %s: load_in_4bit but no %s.weight.absmax", t.file(), t.module, t.module)
			}
			return openBNB4(s, t, s.BNB)
		},
	}
}

// formatThreshold writes a threshold for Format strings.
func formatThreshold(t float64) string { return strconv.FormatFloat(t, 'g', -1, 64) }
