package ggml

// Decoders of the 256-element k-quant super-blocks and IQ4_XS, statement
// for statement as ggml's dequantize_row_<type>.

// Q2_K: scales[16] (4-bit scale | 4-bit min), qs[64], d f16, dmin f16;
// y = d*sc*q - dmin*m.
func decodeQ2_K(b []byte, y []float32) {
	sc := b[0:16]
	q := b[16:80]
	d, mn := f16(b[80:]), f16(b[82:])
	is := 0
	for n := 0; n < qk; n += 128 {
		shift := uint(0)
		for j := 0; j < 4; j++ {
			for h := 0; h < 2; h++ {
				s := sc[is]
				is++
				dl, ml := d*float32(s&0xf), float32(mn*float32(s>>4))
				for l := 0; l < 16; l++ {
					y[0] = float32(dl*float32(q[l+16*h]>>shift&3)) - ml
					y = y[1:]
				}
			}
			shift += 2
		}
		q = q[32:]
	}
}

// q3kScale is the j-th 6-bit scale of Q3_K's 12 packed scale bytes:
// low nibbles in bytes 0-7, high bit pairs in bytes 8-11.
func q3kScale(s []byte, j int) int {
	lo := s[j%8]
	if j >= 8 {
		lo >>= 4
	}
	hi := s[8+j%4] >> uint(2*(j/4)) & 3
	return int(lo&0xf|hi<<4) - 32
}

// Q3_K: hmask[32], qs[64], scales[12], d f16; y = d*(sc-32)*(q - 4*!h).
func decodeQ3_K(b []byte, y []float32) {
	hm := b[0:32]
	q := b[32:96]
	sc := b[96:108]
	d := f16(b[108:])
	m := byte(1)
	is := 0
	for n := 0; n < qk; n += 128 {
		shift := uint(0)
		for j := 0; j < 4; j++ {
			for h := 0; h < 2; h++ {
				dl := d * float32(q3kScale(sc, is))
				is++
				for l := 0; l < 16; l++ {
					v := int(q[l+16*h] >> shift & 3)
					if hm[l+16*h]&m == 0 {
						v -= 4
					}
					y[0] = dl * float32(v)
					y = y[1:]
				}
			}
			shift += 2
			m <<= 1
		}
		q = q[32:]
	}
}

// scaleMinK4 is ggml's get_scale_min_k4: the j-th 6-bit scale and min of
// Q4_K/Q5_K's 12 packed bytes.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K: d f16, dmin f16, scales[12], qs[128]; y = d*sc*q - dmin*m.
func decodeQ4_K(b []byte, y []float32) {
	d, mn := f16(b), f16(b[2:])
	scales := b[4:16]
	q := b[16:144]
	is := 0
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), float32(mn*float32(m))
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), float32(mn*float32(m))
		for l := 0; l < 32; l++ {
			y[l] = float32(d1*float32(q[l]&0xf)) - m1
			y[l+32] = float32(d2*float32(q[l]>>4)) - m2
		}
		y, q = y[64:], q[32:]
		is += 2
	}
}

// Q5_K: d f16, dmin f16, scales[12], qh[32], qs[128]; y = d*sc*q - dmin*m.
func decodeQ5_K(b []byte, y []float32) {
	d, mn := f16(b), f16(b[2:])
	scales := b[4:16]
	qh := b[16:48]
	ql := b[48:176]
	is := 0
	u1, u2 := byte(1), byte(2)
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), float32(mn*float32(m))
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), float32(mn*float32(m))
		for l := 0; l < 32; l++ {
			v1, v2 := int(ql[l]&0xf), int(ql[l]>>4)
			if qh[l]&u1 != 0 {
				v1 += 16
			}
			if qh[l]&u2 != 0 {
				v2 += 16
			}
			y[l] = float32(d1*float32(v1)) - m1
			y[l+32] = float32(d2*float32(v2)) - m2
		}
		y, ql = y[64:], ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

// Q6_K: ql[128], qh[64], scales[16] int8, d f16; y = d*sc*(q-32).
func decodeQ6_K(b []byte, y []float32) {
	ql := b[0:128]
	qh := b[128:192]
	sc := b[192:208]
	d := f16(b[208:])
	for n := 0; n < qk; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			y[l] = d * float32(int8(sc[is])) * float32(q1)
			y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
	}
}

// IQ4_XS: d f16, scales_h u16, scales_l[4], qs[128];
// y = d*(ls-32)*kvalues_iq4nl[q].
func decodeIQ4_XS(b []byte, y []float32) {
	d := f16(b)
	sh := le16(b[2:])
	sl := b[4:8]
	qs := b[8:136]
	for ib := 0; ib < qk/32; ib++ {
		ls := int(sl[ib/2]>>uint(4*(ib%2))&0xf) | int(sh>>uint(2*ib)&3)<<4
		dl := d * float32(ls-32)
		for j := 0; j < 16; j++ {
			y[j] = dl * kv(kvaluesIQ4NL, qs[j])
			y[j+16] = dl * kv(kvaluesIQ4NL, qs[j]>>4)
		}
		y, qs = y[32:], qs[16:]
	}
}
