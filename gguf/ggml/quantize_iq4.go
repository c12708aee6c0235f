package ggml

import "encoding/binary"

// Encoders of the non-linear 4-bit types without an importance matrix:
// quantize_iq4_nl and quantize_iq4_xs (both through
// quantize_row_iq4_nl_impl with ntry = 7, as ggml_quantize_chunk calls
// them), ggml/src/ggml-quants.c.

// iq4Value is kvalues_iq4nl[i] as float32.
func iq4Value(i int) float32 { return float32(int8(kvaluesIQ4NL[i])) }

// bestIndexIQ4 is best_index_int8 over kvalues_iq4nl: the index of the
// codebook value nearest x (the lower one on a tie... as ggml compares).
func bestIndexIQ4(x float32) uint8 {
	if x <= iq4Value(0) {
		return 0
	}
	if x >= iq4Value(15) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < iq4Value(mav) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-iq4Value(mu-1) < iq4Value(mu)-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// iq4Block is the per-32-values part of quantize_row_iq4_nl_impl (no
// importance matrix, weights x², ntry 7): the block's scale, with L
// holding its levels for that scale. ok is false for an all-zero block
// (scale 0, L untouched).
func iq4Block(xb []float32, L []uint8) (d float32, ok bool) {
	const ntry = 7
	var w [32]float32
	for j, v := range xb {
		w[j] = float32(v * v)
	}
	var amax, mx float32
	for _, v := range xb {
		if ax := abs32(v); ax > amax {
			amax, mx = ax, v
		}
	}
	if amax < groupMaxEps {
		return 0, false
	}
	v0 := iq4Value(0)
	d = -mx / v0 // ntry > 0
	id := 1 / d
	var sumQX, sumQ2 float32
	for j, v := range xb {
		l := bestIndexIQ4(float32(id * v))
		L[j] = l
		q := iq4Value(int(l))
		sumQX += float32(float32(w[j]*q) * v)
		sumQ2 += float32(float32(w[j]*q) * q)
	}
	d = 0
	if sumQ2 > 0 {
		d = sumQX / sumQ2
	}
	best := float32(d * sumQX)
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(int8(kvaluesIQ4NL[0]))) / mx
		sumQX, sumQ2 = 0, 0
		for j, v := range xb {
			q := iq4Value(int(bestIndexIQ4(float32(id * v))))
			sumQX += float32(float32(w[j]*q) * v)
			sumQ2 += float32(float32(w[j]*q) * q)
		}
		if sumQ2 > 0 && float32(sumQX*sumQX) > float32(best*sumQ2) {
			d = sumQX / sumQ2
			best = float32(d * sumQX)
		}
	}
	return d, true
}

// packIQ4 packs 32 levels into 16 bytes: low nibbles the first 16 values.
func packIQ4(L []uint8, q []byte) {
	for j := 0; j < 16; j++ {
		q[j] = L[j] | L[16+j]<<4
	}
}

// IQ4_NL: d f16, qs[16] (quantize_iq4_nl, one block per super-block).
func encodeIQ4_NL(x []float32, b []byte) {
	var L [32]uint8
	d, _ := iq4Block(x, L[:])
	put16(b, d)
	// With one block the levels are recomputed for the scale found.
	id := inv(d)
	for j, v := range x {
		L[j] = bestIndexIQ4(float32(id * v))
	}
	packIQ4(L[:], b[2:18])
}

// IQ4_XS: d f16, scales_h u16, scales_l[4], qs[128] (quantize_iq4_xs): the
// eight block scales are quantized to 6 bits against d = -max/32.
func encodeIQ4_XS(x []float32, b []byte) {
	var L [256]uint8
	var scales [8]float32
	var maxScale, amaxScale float32
	for ib := 0; ib < 8; ib++ {
		d, ok := iq4Block(x[32*ib:32*ib+32], L[32*ib:32*ib+32])
		if !ok {
			continue
		}
		scales[ib] = d
		if ad := abs32(d); ad > amaxScale {
			amaxScale, maxScale = ad, d
		}
	}
	d := -maxScale / 32
	put16(b, d)
	id := inv(d)
	var sh uint16
	sl := b[4:8]
	for ib := 0; ib < 8; ib++ {
		l := nearestInt(float32(id * scales[ib]))
		l = max(-32, min(31, l))
		dl := d * float32(l)
		idl := inv(dl)
		for j := 0; j < 32; j++ {
			L[32*ib+j] = bestIndexIQ4(float32(idl * x[32*ib+j]))
		}
		l += 32
		lo, hi := uint8(l&0xf), uint16(l>>4)
		if ib%2 == 0 {
			sl[ib/2] = lo
		} else {
			sl[ib/2] |= lo << 4
		}
		sh |= hi << (2 * (ib % 8))
	}
	binary.LittleEndian.PutUint16(b[2:], sh)
	for i := 0; i < 8; i++ {
		packIQ4(L[32*i:32*i+32], b[8+16*i:8+16*i+16])
	}
}
