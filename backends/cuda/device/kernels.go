package device

import "slices"

// Kernel names of backends/cuda/kernels. Every kernel is launched through
// its typed wrapper (launch.go here; the dequantization kernels' wrappers
// sit beside the Go code that uploads their format, backends/cuda/dq_*.go),
// never by name elsewhere.
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
	KOssGlu      = "oss_glu"
	KSplitQKV    = "split_qkv"
	KSiluMulCat  = "silu_mul_cat"
	KLogitsStats = "logits_stats"
	KLogSoftmax  = "log_softmax_rows"
	KActQuant    = "act_quant"
	KActAmax     = "act_amax"
	KActQuantT   = "act_quant_tensor"
	KLLMInt8Cols = "llmint8_cols"
	KLLMInt8     = "llmint8_quant"
	KDqGGML      = "dq_ggml"
	// gemma.cu
	KScale          = "scale_f32"
	KSoftcap        = "softcap"
	KGeluTanhMul    = "gelu_tanh_mul"
	KGeluTanhMulCat = "gelu_tanh_mul_cat"
	KKVQuant        = "kv_quant"
)

// KernelInfo is a kernel's signature (one letter per parameter: p pointer,
// i int32, u uint32, f float32) and the .cu file (PTX module) holding it.
type KernelInfo struct {
	Sig    string
	Source string
}

// Kernels returns the kernel table (a fresh map each call). The emulator
// checks its compiled kernels against it when a device is created, the GPU
// implementation checks every launch's arguments against it and finds each
// kernel's PTX module through it, and TestKernelTableMatchesSources checks
// it, and every wrapper's arguments, against the prototypes in the .cu
// files.
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
		KAttnSoftmax: {"pipiiiiiip", "attention"},
		KSplitQKV:    {"pppppppiii", "fused"},
		KSiluMulCat:  {"ppii", "fused"},
		KLogitsStats: {"piipppippip", "logits"},
		KLogSoftmax:  {"pii", "logits"},
		KActQuant:    {"pipiiiiiifff", "actquant"},
		KActAmax:     {"ppi", "actquant"},
		KActQuantT:   {"pipiiip", "actquant"},
		KKVQuant:     {"piiiif", "kvquant"},
		KLLMInt8Cols: {"ppiif", "llmint8"},
		KLLMInt8:     {"pippii", "llmint8"},
		// one line per dequantization kernel (kernels/dq_<format>.cu)
		"dq_dense":   {"pipiii", "dq_dense"},
		"dq_ct_pack": {"piiipiiipiiipipi", "dq_ctpack"},
		"dq_int8":    {"piiippiiiip", "dq_ctint"},
		"dq_fp8":     {"piiippiiii", "dq_fp8"},
		"dq_nvfp4":   {"piiippfii", "dq_nvfp4"},
		"dq_mxfp4":   {"piiipp", "dq_mxfp4"},
		"dq_gptq":    {"piiipppipii", "dq_gptq"},
		"dq_awq":     {"piiipppii", "dq_awq"},
		"dq_bnb4":    {"piiipppppfiiiii", "dq_bnb"},
		"dq_bnb8":    {"piiipp", "dq_bnb"},
		KDqGGML:      {"piiipip", "ggml"},
		// gemma.cu
		KScale:          {"pif", "gemma"},
		KSoftcap:        {"pif", "gemma"},
		KGeluTanhMul:    {"pppi", "gemma"},
		KGeluTanhMulCat: {"ppii", "gemma"},
		// qwen3_5 (kernels/deltanet.cu; wrappers in backends/cuda/deltanet.go)
		"conv1d_silu":      {"pppiii", "deltanet"},
		"l2norm_qk":        {"piiiif", "deltanet"},
		"delta_rule":       {"pppppppiiiiii", "deltanet"},
		"gated_rmsnorm":    {"pppiif", "deltanet"},
		"split_q_gate":     {"pppiii", "deltanet"},
		"sigmoid_mul":      {"ppi", "deltanet"},
		"rope_partial":     {"pppiiii", "deltanet"},
		"sigmoid_add_rows": {"pppii", "deltanet"},
		// gpt_oss (kernels/gptoss.cu)
		KOssGlu: {"ppiff", "gptoss"},
		// gemma4_text (kernels/gemma4.cu; wrapper in backends/cuda/gemma4.go)
		"ple_combine": {"pppiiiff", "gemma4"},
	}
}

// Sources lists the kernel source files (without .cu), one PTX module
// each, sorted: the Source values of Kernels.
func Sources() []string {
	var s []string
	for _, k := range Kernels() {
		if !slices.Contains(s, k.Source) {
			s = append(s, k.Source)
		}
	}
	slices.Sort(s)
	return s
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
	AQMXFP4 = 3
	// AQLLMInt8 is bitsandbytes' LLM.int8 decomposition: not an act_quant
	// kind but llmint8_cols + llmint8_quant (kernels/llmint8.cu).
	AQLLMInt8 = 4
	// AQNVFP4Block is AQNVFP4 writing e2m1 · (E4M3 block scale), without
	// the division by the global scale (exact in bf16 and fp16); the GEMM
	// output is then multiplied by 1/gscale.
	AQNVFP4Block = 5
)
