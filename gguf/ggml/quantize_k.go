package ggml

import "math"

// Encoders of the 256-element k-quant super-blocks without an importance
// matrix: quantize_row_q4_K_ref, quantize_row_q5_K_ref and
// quantize_row_q6_K_ref with their helpers make_qkx2_quants and
// make_qx_quants (ggml/src/ggml-quants.c), in float32, operation for
// operation.

// sqrt32 is sqrtf (float64's correctly rounded root rounds to float32's).
func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it is all zero.
const groupMaxEps = 1e-15

// makeQKX2 is make_qkx2_quants: the scale and (negated) minimum of an
// asymmetric nmax-level quantization of x under weights w, searching
// nstep+1 scales around the min/max one; L receives the levels.
func makeQKX2(nmax int, x, w []float32, L, laux []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -mn
	}
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * (x[i] - mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+mn) - x[i]
		diff = float32(diff * diff)
		bestError += float32(w[i] * diff)
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * (x[i] - mn)))
			l = max(0, min(nmax, l))
			laux[i] = uint8(l)
			fl := float32(l)
			sumL += float32(w[i] * fl)
			sumL2 += float32(float32(w[i]*fl) * fl)
			sumXL += float32(float32(w[i]*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				diff = float32(diff * diff)
				curError += float32(w[i] * diff)
			}
			if curError < bestError {
				copy(L[:n], laux[:n])
				bestError = curError
				scale, mn = thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// makeQX is make_qx_quants with rmse_type 1 and no importance weights (the
// weights are x²): the scale of a symmetric quantization to levels
// -nmax..nmax-1, stored in L as level+nmax, refined over 18 trial scales.
func makeQX(nmax int, x []float32, L []int8) float32 {
	n := len(x)
	var mx, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, mx = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / mx
	var sumLX, sumL2 float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * x[i]))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l + nmax)
		w := float32(x[i] * x[i])
		fl := float32(l)
		sumLX += float32(float32(w*x[i]) * fl)
		sumL2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / mx
		sumLX, sumL2 = 0, 0
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * x[i]))
			l = max(-nmax, min(nmax-1, l))
			w := float32(x[i] * x[i])
			fl := float32(l)
			sumLX += float32(float32(w*x[i]) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			for i := 0; i < n; i++ {
				l := nearestInt(float32(iscale * x[i]))
				L[i] = int8(nmax + max(-nmax, min(nmax-1, l)))
			}
			scale = sumLX / sumL2
			best = float32(scale * sumLX)
		}
	}
	return scale
}

// kScalesMins runs make_qkx2_quants over the eight 32-value sub-blocks of
// a Q4_K/Q5_K super-block (weights av_x + |x|) and packs the 6-bit scales
// and mins into sc (12 bytes) with the super-block's d and dmin; it
// returns d and dmin as stored (float16).
func kScalesMins(x []float32, nmax int, rmin, rdelta float32, nstep int, L []uint8, sc []byte) (d, dmin float32) {
	var scales, mins [8]float32
	var w [32]float32
	var laux [32]uint8
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			w[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2(nmax, xs, w[:], L[32*j:32*j+32], laux[:], rmin, rdelta, nstep)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	for i := range sc[:12] {
		sc[i] = 0
	}
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	return maxScale / 63, maxMin / 63
}

// kLevels recomputes the levels of every sub-block from the stored
// (float16) d and dmin and 6-bit scales, as the _ref functions do.
func kLevels(x []float32, d16, dmin16 []byte, sc []byte, nmax int, L []uint8) {
	d0, m0 := f16(d16), f16(dmin16)
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, sc)
		d := d0 * float32(s)
		if d == 0 {
			continue
		}
		dm := m0 * float32(m)
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

// Q4_K: d f16, dmin f16, scales[12], qs[128] (quantize_row_q4_K_ref).
func encodeQ4_K(x []float32, b []byte) {
	var L [256]uint8
	d, dmin := kScalesMins(x, 15, -1, 0.1, 20, L[:], b[4:16])
	put16(b, d)
	put16(b[2:], dmin)
	kLevels(x, b[0:2], b[2:4], b[4:16], 15, L[:])
	q := b[16:144]
	for j := 0; j < 256; j += 64 {
		for l := 0; l < 32; l++ {
			q[l] = L[j+l] | L[j+l+32]<<4
		}
		q = q[32:]
	}
}

// Q5_K: d f16, dmin f16, scales[12], qh[32], qs[128]
// (quantize_row_q5_K_ref).
func encodeQ5_K(x []float32, b []byte) {
	var L [256]uint8
	d, dmin := kScalesMins(x, 31, -0.5, 0.1, 15, L[:], b[4:16])
	put16(b, d)
	put16(b[2:], dmin)
	kLevels(x, b[0:2], b[2:4], b[4:16], 31, L[:])
	qh, ql := b[16:48], b[48:176]
	for i := range qh {
		qh[i] = 0
	}
	m1, m2 := byte(1), byte(2)
	for n := 0; n < 256; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
		ql = ql[32:]
	}
}

// Q6_K: ql[128], qh[64], scales[16] int8, d f16 (quantize_row_q6_K_ref).
func encodeQ6_K(x []float32, b []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		s := makeQX(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if as := abs32(s); as > maxAbsScale {
			maxAbsScale, maxScale = as, s
		}
	}
	for i := range b[:210] {
		b[i] = 0
	}
	if maxAbsScale < groupMaxEps {
		return // all zero, d = +0
	}
	iscale := -128 / maxScale
	put16(b[208:], 1/iscale)
	sc := b[192:208]
	for ib := 0; ib < 16; ib++ {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	d0 := f16(b[208:])
	for j := 0; j < 16; j++ {
		d := d0 * float32(int8(sc[j]))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(x[16*j+ii] / d)
			L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
		}
	}
	ql, qh := b[0:128], b[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1 := byte(L[j+l]) & 0xf
			q2 := byte(L[j+l+32]) & 0xf
			q3 := byte(L[j+l+64]) & 0xf
			q4 := byte(L[j+l+96]) & 0xf
			ql[l] = q1 | q3<<4
			ql[l+32] = q2 | q4<<4
			qh[l] = byte(L[j+l])>>4 | byte(L[j+l+32])>>4<<2 | byte(L[j+l+64])>>4<<4 | byte(L[j+l+96])>>4<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
}
