// kernels.cc: the kernels of backends/cuda/kernels compiled as host C++
// under shim.h, and the table that lets Go launch them by name.
#include "shim.h"
#include "runtime.h"

#include <stddef.h>
#include <type_traits>
#include <utility>

#include "k_elementwise.h"
#include "k_norm.h"
#include "k_attention.h"
#include "k_logits.h"
#include "k_dq.h"
#include "k_dq_dense.h"
#include "k_dq_ctpack.h"
#include "k_dq_ctint.h"
#include "k_dq_fp8.h"
#include "k_dq_nvfp4.h"
#include "k_dq_bnb.h"
#include "k_dq_mxfp4.h"
#include "k_dq_gptq.h"
#include "k_dq_awq.h"
#include "k_actquant.h"
#include "k_llmint8.h"
#include "k_ggml.h"
#include "k_fused.h"
#include "k_gemma.h"
#include "k_kvquant.h"
#include "k_deltanet.h"
#include "k_gptoss.h"
#include "k_gemma4.h"

template <typename T> static constexpr char sigchar() {
	return std::is_pointer<T>::value ? 'p'
	       : std::is_same<T, int>::value ? 'i'
	       : std::is_same<T, unsigned>::value ? 'u'
	       : std::is_same<T, float>::value ? 'f'
					       : '?';
}

template <typename T> static T argval(uint64_t v) {
	T t;
	memcpy(&t, &v, sizeof(T)); // little-endian: scalars sit in the low bytes
	return t;
}

template <typename F> struct Sig;
template <typename... A> struct Sig<void (*)(A...)> {
	static const char *str() {
		static const char s[] = {sigchar<A>()..., 0};
		return s;
	}
	template <size_t... I> static void call(void (*f)(A...), const uint64_t *v, std::index_sequence<I...>) {
		f(argval<A>(v[I])...);
	}
	static void invoke(void (*f)(A...), const uint64_t *v) { call(f, v, std::index_sequence_for<A...>{}); }
};

template <auto F> static void invoke(const uint64_t *v) { Sig<decltype(F)>::invoke(F, v); }

#define K(name, sync) {#name, Sig<decltype(&name)>::str(), &invoke<&name>, sync}

static const EmuKernel table[] = {
    K(fill_f32, 0),   K(cast_act, 0),     K(embed_gather, 0), K(add_inplace, 0),  K(add_bias_rows, 0),
    K(silu_mul, 0),   K(rope, 0),         K(rms_norm, 1),     K(attention, 1),    K(logits_stats, 1),
    K(act_quant, 1),  K(kv_quant, 0),     K(llmint8_cols, 0), K(llmint8_quant, 1),
    K(act_amax, 1),   K(act_quant_tensor, 0),
    // one line per dequantization kernel file (kernels/dq_*.cu)
    K(dq_dense, 0),   K(dq_ct_pack, 0),   K(dq_int8, 0),      K(dq_fp8, 0),       K(dq_nvfp4, 0),
    K(dq_mxfp4, 0),   K(dq_gptq, 0),      K(dq_awq, 0),       K(dq_bnb4, 0),      K(dq_bnb8, 0),
    K(dq_ggml, 0),
    K(attn_prep, 0),  K(attn_softmax, 1), K(log_softmax_rows, 1), K(split_qkv, 0), K(silu_mul_cat, 0),
    // gemma.cu
    K(scale_f32, 0),  K(softcap, 0),      K(gelu_tanh_mul, 0), K(gelu_tanh_mul_cat, 0),
    // qwen3_5 (deltanet.cu)
    K(conv1d_silu, 0), K(l2norm_qk, 0), K(delta_rule, 0), K(gated_rmsnorm, 0), K(split_q_gate, 0),
    K(sigmoid_mul, 0), K(rope_partial, 0), K(sigmoid_add_rows, 0),
    // gpt_oss (gptoss.cu)
    K(oss_glu, 0),
    // gemma4_text (gemma4.cu)
    K(ple_combine, 0),
};

extern "C" int emu_kernel_count(void) { return (int)(sizeof table / sizeof table[0]); }
extern "C" const EmuKernel *emu_kernel_at(int i) { return &table[i]; }
