package device

// Kernel names of backends/cuda/kernels and their parameter kinds (one
// letter per parameter: p pointer, i int32, u uint32, f float32). The
// emulator's table is checked against this one in emu's tests; the GPU
// implementation uses it to check arguments before a launch and to find
// each kernel's PTX module.
const (
	KFill        = "fill_f32"
	KCastAct     = "cast_act"
	KEmbedGather = "embed_gather"
	KAddInplace  = "add_inplace"
	KAddBiasRows = "add_bias_rows"
	KSiluMul     = "silu_mul"
	KRope        = "rope"
	KRMSNorm     = "rms_norm"
	KAttention   = "attention"
	KAttnPrep    = "attn_prep"
	KAttnSoftmax = "attn_softmax"
	KSplitQKV    = "split_qkv"
	KSiluMulCat  = "silu_mul_cat"
	KLogitsStats = "logits_stats"
	KLogSoftmax  = "log_softmax_rows"
	KDqDense     = "dq_dense"
	KDqCTPack    = "dq_ct_pack"
	KDqNVFP4     = "dq_nvfp4"
	KDqFP8       = "dq_fp8"
	KDqInt8      = "dq_int8"
	KDqGPTQ      = "dq_gptq"
	KDqAWQ       = "dq_awq"
	KActQuant    = "act_quant"
	KDqGGML      = "dq_ggml"
)

// KernelInfo is a kernel's signature and the .cu file (PTX module) holding it.
type KernelInfo struct {
	Sig    string
	Source string
}

// Kernels returns the kernel table (a fresh map each call).
func Kernels() map[string]KernelInfo {
	return map[string]KernelInfo{
		KFill:        {"pif", "elementwise"},
		KCastAct:     {"ppii", "elementwise"},
		KEmbedGather: {"ppipiii", "elementwise"},
		KAddInplace:  {"ppi", "elementwise"},
		KAddBiasRows: {"ppii", "elementwise"},
		KSiluMul:     {"pppi", "elementwise"},
		KRope:        {"pppiii", "elementwise"},
		KRMSNorm:     {"pppiif", "norm"},
		KAttention:   {"ppppiiiifii", "attention"},
		KAttnPrep:    {"ppppppiiiii", "attention"},
		KAttnSoftmax: {"pipiiiiii", "attention"},
		KSplitQKV:    {"pppppppiii", "fused"},
		KSiluMulCat:  {"ppii", "fused"},
		KLogitsStats: {"piipppippip", "logits"},
		KLogSoftmax:  {"pii", "logits"},
		KDqDense:     {"pipiii", "dequant"},
		KDqCTPack:    {"piiipiiipiiipipi", "dequant"},
		KDqNVFP4:     {"piiippfii", "dequant"},
		KDqFP8:       {"piiippiiii", "dequant"},
		KDqInt8:      {"piiippiiiip", "dequant"},
		KDqGPTQ:      {"piiipppipii", "dequant"},
		KDqAWQ:       {"piiipppii", "dequant"},
		KActQuant:    {"pipiiiiiifff", "actquant"},
		KDqGGML:      {"piiipip", "ggml"},
	}
}

// Sources lists the kernel source files (without .cu), one PTX module each.
func Sources() []string {
	return []string{"elementwise", "norm", "attention", "logits", "dequant", "actquant", "ggml", "fused"}
}

// Attention launch geometry (kernels/attention.cu ATT_BQ, ATT_BK, ATT_MAXD).
const (
	AttnBlockQ  = 64
	AttnMaxHead = 256
)

// AttnTileK returns the keys per shared-memory tile of the attention
// kernel for head dimension d; its dynamic shared memory is 2·tile·d·4
// bytes (≤ 32 KB, below the 48 KB default limit).
func AttnTileK(d int) int {
	if d > 128 {
		return 16
	}
	return 32
}

// Base log-prob kinds of logits_stats (kernels/logits.cu).
const (
	BaseNone = 0
	BaseF32  = 1
	BaseU16  = 2
)

// Activation quantizer kinds of act_quant (kernels/actquant.cu).
const (
	AQInt8  = 0
	AQFP8   = 1
	AQNVFP4 = 2
)
