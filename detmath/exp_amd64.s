#include "textflag.h"

DATA exp_log2e<>+0(SB)/8, $0x3ff71547652b82fe
DATA exp_log2e<>+8(SB)/8, $0x3ff71547652b82fe
DATA exp_log2e<>+16(SB)/8, $0x3ff71547652b82fe
DATA exp_log2e<>+24(SB)/8, $0x3ff71547652b82fe
GLOBL exp_log2e<>(SB), RODATA|NOPTR, $32
DATA exp_magic<>+0(SB)/8, $0x4338000000000000
DATA exp_magic<>+8(SB)/8, $0x4338000000000000
DATA exp_magic<>+16(SB)/8, $0x4338000000000000
DATA exp_magic<>+24(SB)/8, $0x4338000000000000
GLOBL exp_magic<>(SB), RODATA|NOPTR, $32
DATA exp_ln2hi<>+0(SB)/8, $0x3fe62e42fefa39ef
DATA exp_ln2hi<>+8(SB)/8, $0x3fe62e42fefa39ef
DATA exp_ln2hi<>+16(SB)/8, $0x3fe62e42fefa39ef
DATA exp_ln2hi<>+24(SB)/8, $0x3fe62e42fefa39ef
GLOBL exp_ln2hi<>(SB), RODATA|NOPTR, $32
DATA exp_ln2lo<>+0(SB)/8, $0x3c7abc9e3b39803f
DATA exp_ln2lo<>+8(SB)/8, $0x3c7abc9e3b39803f
DATA exp_ln2lo<>+16(SB)/8, $0x3c7abc9e3b39803f
DATA exp_ln2lo<>+24(SB)/8, $0x3c7abc9e3b39803f
GLOBL exp_ln2lo<>(SB), RODATA|NOPTR, $32
DATA exp_lo<>+0(SB)/8, $0xc086200000000000
DATA exp_lo<>+8(SB)/8, $0xc086200000000000
DATA exp_lo<>+16(SB)/8, $0xc086200000000000
DATA exp_lo<>+24(SB)/8, $0xc086200000000000
GLOBL exp_lo<>(SB), RODATA|NOPTR, $32
DATA exp_hi<>+0(SB)/8, $0x4086280000000000
DATA exp_hi<>+8(SB)/8, $0x4086280000000000
DATA exp_hi<>+16(SB)/8, $0x4086280000000000
DATA exp_hi<>+24(SB)/8, $0x4086280000000000
GLOBL exp_hi<>(SB), RODATA|NOPTR, $32
DATA exp_c13<>+0(SB)/8, $0x3de6124613a86d09
DATA exp_c13<>+8(SB)/8, $0x3de6124613a86d09
DATA exp_c13<>+16(SB)/8, $0x3de6124613a86d09
DATA exp_c13<>+24(SB)/8, $0x3de6124613a86d09
GLOBL exp_c13<>(SB), RODATA|NOPTR, $32
DATA exp_c12<>+0(SB)/8, $0x3e21eed8eff8d898
DATA exp_c12<>+8(SB)/8, $0x3e21eed8eff8d898
DATA exp_c12<>+16(SB)/8, $0x3e21eed8eff8d898
DATA exp_c12<>+24(SB)/8, $0x3e21eed8eff8d898
GLOBL exp_c12<>(SB), RODATA|NOPTR, $32
DATA exp_c11<>+0(SB)/8, $0x3e5ae64567f544e4
DATA exp_c11<>+8(SB)/8, $0x3e5ae64567f544e4
DATA exp_c11<>+16(SB)/8, $0x3e5ae64567f544e4
DATA exp_c11<>+24(SB)/8, $0x3e5ae64567f544e4
GLOBL exp_c11<>(SB), RODATA|NOPTR, $32
DATA exp_c10<>+0(SB)/8, $0x3e927e4fb7789f5c
DATA exp_c10<>+8(SB)/8, $0x3e927e4fb7789f5c
DATA exp_c10<>+16(SB)/8, $0x3e927e4fb7789f5c
DATA exp_c10<>+24(SB)/8, $0x3e927e4fb7789f5c
GLOBL exp_c10<>(SB), RODATA|NOPTR, $32
DATA exp_c9<>+0(SB)/8, $0x3ec71de3a556c734
DATA exp_c9<>+8(SB)/8, $0x3ec71de3a556c734
DATA exp_c9<>+16(SB)/8, $0x3ec71de3a556c734
DATA exp_c9<>+24(SB)/8, $0x3ec71de3a556c734
GLOBL exp_c9<>(SB), RODATA|NOPTR, $32
DATA exp_c8<>+0(SB)/8, $0x3efa01a01a01a01a
DATA exp_c8<>+8(SB)/8, $0x3efa01a01a01a01a
DATA exp_c8<>+16(SB)/8, $0x3efa01a01a01a01a
DATA exp_c8<>+24(SB)/8, $0x3efa01a01a01a01a
GLOBL exp_c8<>(SB), RODATA|NOPTR, $32
DATA exp_c7<>+0(SB)/8, $0x3f2a01a01a01a01a
DATA exp_c7<>+8(SB)/8, $0x3f2a01a01a01a01a
DATA exp_c7<>+16(SB)/8, $0x3f2a01a01a01a01a
DATA exp_c7<>+24(SB)/8, $0x3f2a01a01a01a01a
GLOBL exp_c7<>(SB), RODATA|NOPTR, $32
DATA exp_c6<>+0(SB)/8, $0x3f56c16c16c16c17
DATA exp_c6<>+8(SB)/8, $0x3f56c16c16c16c17
DATA exp_c6<>+16(SB)/8, $0x3f56c16c16c16c17
DATA exp_c6<>+24(SB)/8, $0x3f56c16c16c16c17
GLOBL exp_c6<>(SB), RODATA|NOPTR, $32
DATA exp_c5<>+0(SB)/8, $0x3f81111111111111
DATA exp_c5<>+8(SB)/8, $0x3f81111111111111
DATA exp_c5<>+16(SB)/8, $0x3f81111111111111
DATA exp_c5<>+24(SB)/8, $0x3f81111111111111
GLOBL exp_c5<>(SB), RODATA|NOPTR, $32
DATA exp_c4<>+0(SB)/8, $0x3fa5555555555555
DATA exp_c4<>+8(SB)/8, $0x3fa5555555555555
DATA exp_c4<>+16(SB)/8, $0x3fa5555555555555
DATA exp_c4<>+24(SB)/8, $0x3fa5555555555555
GLOBL exp_c4<>(SB), RODATA|NOPTR, $32
DATA exp_c3<>+0(SB)/8, $0x3fc5555555555555
DATA exp_c3<>+8(SB)/8, $0x3fc5555555555555
DATA exp_c3<>+16(SB)/8, $0x3fc5555555555555
DATA exp_c3<>+24(SB)/8, $0x3fc5555555555555
GLOBL exp_c3<>(SB), RODATA|NOPTR, $32
DATA exp_half<>+0(SB)/8, $0x3fe0000000000000
DATA exp_half<>+8(SB)/8, $0x3fe0000000000000
DATA exp_half<>+16(SB)/8, $0x3fe0000000000000
DATA exp_half<>+24(SB)/8, $0x3fe0000000000000
GLOBL exp_half<>(SB), RODATA|NOPTR, $32
DATA exp_one<>+0(SB)/8, $0x3ff0000000000000
DATA exp_one<>+8(SB)/8, $0x3ff0000000000000
DATA exp_one<>+16(SB)/8, $0x3ff0000000000000
DATA exp_one<>+24(SB)/8, $0x3ff0000000000000
GLOBL exp_one<>(SB), RODATA|NOPTR, $32
DATA exp_bias<>+0(SB)/8, $0x3ff0000000000000
DATA exp_bias<>+8(SB)/8, $0x3ff0000000000000
DATA exp_bias<>+16(SB)/8, $0x3ff0000000000000
DATA exp_bias<>+24(SB)/8, $0x3ff0000000000000
GLOBL exp_bias<>(SB), RODATA|NOPTR, $32

// func expAVX2(dst, src []float64) int
// Computes dst[i] = Exp(src[i]) four at a time, with exactly the
// operations of Exp, while all four lanes lie in [-708, 709]; returns the
// number of elements done (a multiple of 4).
TEXT ·expAVX2(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $2, CX
	XORQ AX, AX
	VMOVUPD exp_log2e<>(SB), Y8
	VMOVUPD exp_magic<>(SB), Y9
	VMOVUPD exp_ln2hi<>(SB), Y10
	VMOVUPD exp_ln2lo<>(SB), Y11
	VMOVUPD exp_lo<>(SB), Y12
	VMOVUPD exp_hi<>(SB), Y13
	VMOVUPD exp_bias<>(SB), Y14
	VMOVUPD exp_one<>(SB), Y15
loop:
	TESTQ CX, CX
	JZ done
	VMOVUPD (SI)(AX*8), Y0
	VCMPPD $0x1d, Y12, Y0, Y1 // x >= -708 (ordered)
	VCMPPD $0x12, Y13, Y0, Y2 // x <= 709 (ordered)
	VANDPD Y1, Y2, Y1
	VMOVMSKPD Y1, DX
	CMPQ DX, $15
	JNE done
	VMOVAPD Y9, Y1
	VFMADD231PD Y8, Y0, Y1 // t = fma(x, log2e, magic)
	VSUBPD Y9, Y1, Y3 // n = t - magic
	VMOVAPD Y0, Y4
	VFNMADD231PD Y10, Y3, Y4 // r = fma(-n, ln2hi, x)
	VFNMADD231PD Y11, Y3, Y4 // r = fma(-n, ln2lo, r)
	VMOVUPD exp_c13<>(SB), Y5
	VFMADD213PD exp_c12<>(SB), Y4, Y5 // p = fma(p, r, 1/12!)
	VFMADD213PD exp_c11<>(SB), Y4, Y5 // p = fma(p, r, 1/11!)
	VFMADD213PD exp_c10<>(SB), Y4, Y5 // p = fma(p, r, 1/10!)
	VFMADD213PD exp_c9<>(SB), Y4, Y5 // p = fma(p, r, 1/9!)
	VFMADD213PD exp_c8<>(SB), Y4, Y5 // p = fma(p, r, 1/8!)
	VFMADD213PD exp_c7<>(SB), Y4, Y5 // p = fma(p, r, 1/7!)
	VFMADD213PD exp_c6<>(SB), Y4, Y5 // p = fma(p, r, 1/6!)
	VFMADD213PD exp_c5<>(SB), Y4, Y5 // p = fma(p, r, 1/5!)
	VFMADD213PD exp_c4<>(SB), Y4, Y5 // p = fma(p, r, 1/4!)
	VFMADD213PD exp_c3<>(SB), Y4, Y5 // p = fma(p, r, 1/3!)
	VFMADD213PD exp_half<>(SB), Y4, Y5
	VFMADD213PD Y15, Y4, Y5
	VFMADD213PD Y15, Y4, Y5
	VPSLLQ $52, Y1, Y6 // 2^n from the bits of t
	VPADDQ Y14, Y6, Y6
	VMULPD Y6, Y5, Y5
	VMOVUPD Y5, (DI)(AX*8)
	ADDQ $4, AX
	DECQ CX
	JMP loop
done:
	VZEROUPPER
	MOVQ AX, ret+48(FP)
	RET
