package quant

import (
	"fmt"
	"strings"
)

// Dense is an unquantized F32/F16/BF16/F64 weight.
type Dense struct {
	Base
	DType string // safetensors dtype of Raw
	Raw   []byte // the weight's bytes as stored, row-major [Out][In]
}

func openDense(t tensors) (*Dense, error) {
	ti, raw, err := t.matrix("weight", "F32", "F16", "BF16", "F64")
	if err != nil {
		return nil, err
	}
	d := &Dense{DType: string(ti.DType), Raw: raw}
	d.Base = Base{Name: t.module, Out: ti.Shape[0], In: ti.Shape[1], Fmt: strings.ToLower(string(ti.DType)),
		Bytes: storedBytes(t.src, t.module), FileName: ti.File}
	return d, nil
}

// Dequantize implements Linear.
func (d *Dense) Dequantize(dst []float64) error {
	if err := d.checkDst(dst); err != nil {
		return err
	}
	if !decodeFloatsInto(d.DType, d.Raw, dst) {
		return fmt.Errorf("quant: %s: cannot decode %d bytes of %s into %d weights", d.Name, len(d.Raw), d.DType, len(dst))
	}
	return nil
}

// DequantizeRows implements RowDequantizer.
func (d *Dense) DequantizeRows(r0, r1 int, dst []float64) error {
	if err := d.checkRows(r0, r1, dst); err != nil {
		return err
	}
	sz := dtypeSize(d.DType)
	if sz == 0 || len(d.Raw) != sz*d.Out*d.In || !decodeFloatsInto(d.DType, d.Raw[r0*d.In*sz:r1*d.In*sz], dst) {
		return fmt.Errorf("quant: %s: cannot decode rows [%d, %d) of %d bytes of %s", d.Name, r0, r1, len(d.Raw), d.DType)
	}
	return nil
}

func denseFamily() family {
	return family{
		name:      "dense",
		ctFormats: []string{FormatDense},
		open: func(_ *Scheme, t tensors, _ *Group) (Linear, error) {
			d, err := openDense(t)
			if err != nil {
				return nil, err
			}
			return d, nil
		},
	}
}
