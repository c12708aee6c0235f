package compare

// This file holds the JSON types of one evaluation result: the object that
// `qppl eval --json` writes and that `qppl compare`, the plots and the
// regression gate read. Field names are stable; new fields are only added.
//
// Conventions:
//   - "NLL" is the natural-log negative log-likelihood of a target token.
//   - Every "_se" field is a standard error of the mean computed exactly as
//     llama.cpp's llama-perplexity does: sqrt((E[x²]−E[x]²)/(count−1)). The
//     top-level ppl_se/nll_mean_se follow its perplexity mode (0 when count
//     < 2); the "kld" object follows its KL-divergence mode (0 unless count
//     > 10; covariances 0 when count < 10).
//   - A statistic that needs a base model (the "kld" object) is absent when
//     no base log-probs were given.
//   - Timing (wall time, tokens/s) lives only in the separate "timing" object,
//     so two runs of the same evaluation give byte-identical JSON once
//     "timing" is removed.

// Result is one model evaluated on one data spec.
type Result struct {
	// Label is a free-form name of the model for tables and plots (compare_q
	// model-spec "label"; its first word is the format family, a "[colour]"
	// tag may follow). Empty when not given.
	Label string `json:"label,omitempty"`
	// Model is the model directory or hub id as given on the command line.
	Model string `json:"model"`
	// ModelHash is the hex sha256 over the model files (config.json and
	// every safetensors file, see HashFiles); empty when not computed.
	ModelHash string `json:"model_hash,omitempty"`
	// Backend is the backend's name ("reference", "emu", "cuda").
	Backend string `json:"backend"`
	// Precision is the backend's arithmetic ("fp64", "bf16", ...).
	Precision string `json:"precision,omitempty"`

	// Method is the windowing method (Method constants: "compare_q",
	// "exl3-ppl", "llamacpp", "hf-strided", "lm-eval").
	Method string `json:"method"`
	// Ctx is the window length in tokens (eval_len / n_ctx / max_length).
	Ctx int `json:"ctx"`
	// Stride is the window stride in tokens (compare_q, hf-strided); 0 for
	// methods without one.
	Stride int `json:"stride"`
	// Rows is the cap on windows that was asked for (0 = all).
	Rows int `json:"rows"`
	// Windows is the number of windows evaluated.
	Windows int `json:"windows"`
	// TokensScored is the number of target tokens whose NLL entered PPL.
	TokensScored int64 `json:"tokens_scored"`

	// PPL is exp(ΣNLL / TokensScored), pooled over all scored tokens of all
	// windows (compare_q, llama.cpp and HF all pool this way).
	PPL float64 `json:"ppl"`
	// PPLSE is llama.cpp's error propagation: PPL · NLLMeanSE.
	PPLSE float64 `json:"ppl_se"`
	// PPLBootstrap is a percentile interval of PPL from resampling whole
	// windows with replacement (seeded, deterministic). Overlapping windows
	// make PPLSE optimistic; this interval is not. Absent with < 2 windows.
	PPLBootstrap *Interval `json:"ppl_bootstrap,omitempty"`
	// NLLMean is ΣNLL / TokensScored (= ln PPL).
	NLLMean float64 `json:"nll_mean"`
	// NLLMeanSE is the standard error of NLLMean over tokens.
	NLLMeanSE float64 `json:"nll_mean_se"`

	// HFGuidePPL is the perplexity exactly as the Hugging Face guide's loop
	// accumulates it (each window's mean NLL weighted by its number of valid
	// labels minus one, a quirk that under-weights every window but the
	// first by one token); only for method "hf-strided". PPL is the exact
	// pooled value over the same tokens.
	HFGuidePPL float64 `json:"hf_guide_ppl,omitempty"`

	// LMEval holds lm-eval's corpus-level metrics; only for method "lm-eval".
	LMEval *LMEvalMetrics `json:"lm_eval,omitempty"`

	// BPWLayer is the decoder-only bits per weight (stored bytes of every
	// Linear tensor of the decoder layers × 8 / their weight count), as
	// compare_q computes it; embeddings and head excluded. 0 when unknown.
	BPWLayer float64 `json:"bpw_layer"`
	// BPWHead is the bits per weight of the output head (lm_head, or the
	// tied embedding).
	BPWHead float64 `json:"bpw_head"`
	// VRAMGB is compare_q's VRAM estimate: (head weights · BPWHead + Σ layer
	// bits) / 8 / 1024³.
	VRAMGB float64 `json:"vram_gb"`
	// Format names the checkpoint's weight format (e.g. "bf16",
	// "ct-int4-g128-sym", "mixed").
	Format string `json:"format,omitempty"`

	// Data describes the token stream and the windowing; DataSpecHash and
	// TokensHash identify them (results are only comparable when both match).
	Data DataSpec `json:"data"`
	// DataSpecHash is the hex sha256 of the canonical data spec (tokens hash,
	// method, ctx, stride, rows): see DataSpec.Hash.
	DataSpecHash string `json:"data_spec_hash"`
	// TokensHash is the hex sha256 of the token stream as int32 little-endian
	// bytes (see TokensHash).
	TokensHash string `json:"tokens_hash"`

	// KLD holds the statistics against a base model; nil without a base.
	KLD *KLDStats `json:"kld,omitempty"`

	// AllowUnusedTensors records --allow-unused-tensors: the checkpoint was
	// evaluated although UnusedTensors (sorted) were used by neither the
	// forward pass nor the format. Absent on a normal run, where unused
	// tensors stop the run.
	AllowUnusedTensors bool     `json:"allow_unused_tensors,omitempty"`
	UnusedTensors      []string `json:"unused_tensors,omitempty"`
	// IgnoredTensors: tensors the architecture leaves alone on purpose (a
	// multimodal checkpoint's vision tower), counted per prefix.
	IgnoredTensors []IgnoredTensors `json:"ignored_tensors,omitempty"`

	// KVCacheQuant records --kv-cache-quant for a checkpoint with a
	// quantized KV cache: "on" (keys and values went through the FP8 cache
	// KVCacheScheme describes) or "off" (its k/v scales were deliberately
	// ignored: the weights alone). Absent for checkpoints without one.
	KVCacheQuant  string `json:"kv_cache_quant,omitempty"`
	KVCacheScheme string `json:"kv_cache_scheme,omitempty"`

	// Timing is the only non-deterministic part of a result.
	Timing *Timing `json:"timing,omitempty"`
}

// DataSpec describes where the tokens came from and how they were windowed.
// Only Method, Ctx, Stride, Rows and TokensHash enter the hash; the other
// fields are informative.
type DataSpec struct {
	// Source is the text file, token file or dataset name ("wikitext2").
	Source string `json:"source,omitempty"`
	// Join is the WikiText row join mode ("compare_q", "filtered",
	// "llamacpp") when Source is a dataset.
	Join string `json:"join,omitempty"`
	// Tokenizer is the tokenizer.json used, empty for a token file.
	Tokenizer string `json:"tokenizer,omitempty"`
	// NumTokens is the length of the token stream.
	NumTokens int `json:"num_tokens"`
	// TokensHash is the hex sha256 of the stream (int32 LE).
	TokensHash string `json:"tokens_hash"`
	Method     string `json:"method"`
	Ctx        int    `json:"ctx"`
	Stride     int    `json:"stride"`
	Rows       int    `json:"rows"`
	// Documents is the number of documents (lm-eval only).
	Documents int `json:"documents,omitempty"`
}

// Interval is a two-sided confidence interval.
type Interval struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Level is the coverage, e.g. 0.95.
	Level float64 `json:"level"`
	// Samples is the number of bootstrap resamples.
	Samples int `json:"samples"`
	// Seed is the PCG seed used for resampling.
	Seed uint64 `json:"seed"`
}

// LMEvalMetrics are lm-eval's wikitext metrics, each a corpus-level weighted
// mean over documents (lm_eval/api/metrics.py weighted_perplexity /
// bits_per_byte): LL is the total log-likelihood of all documents.
type LMEvalMetrics struct {
	// WordPerplexity = exp(-ΣLL / Σwords), words = len(re.split(r"\s+", page))
	// on the original page.
	WordPerplexity float64 `json:"word_perplexity"`
	// BytePerplexity = exp(-ΣLL / Σbytes), UTF-8 bytes of the original page.
	BytePerplexity float64 `json:"byte_perplexity"`
	// BitsPerByte = -ΣLL / Σbytes / ln 2.
	BitsPerByte float64 `json:"bits_per_byte"`
	// Words and Bytes are the denominators.
	Words int64 `json:"words"`
	Bytes int64 `json:"bytes"`
	// LogLikelihood is ΣLL (natural log, negative).
	LogLikelihood float64 `json:"loglikelihood"`
}

// KLDStats are the statistics of the evaluated model Q against a base model
// P, llama.cpp's --kl-divergence set plus median, percentiles and top-k
// agreement. KL is per position over the full vocabulary, KL(P ‖ Q) =
// Σ_i p_i (log p_i − log q_i); with a 16-bit (llama.cpp) base file only the
// terms with base log-prob > −16 enter, exactly as llama.cpp.
type KLDStats struct {
	// Mode is "scored" (one KL position per scored target of every window,
	// llama.cpp's coverage) or "compare_q" (every logits position of the
	// first Rows windows, compare_q's coverage, the last position included).
	Mode string `json:"mode"`
	// Rows is the number of windows with KL values.
	Rows int `json:"rows"`
	// BaseFormat is the base store's record encoding ("llamacpp-u16",
	// "f32", "f64").
	BaseFormat string `json:"base_format"`
	// BaseKey is the base store's key (data spec and base model hashes).
	BaseKey string `json:"base_key,omitempty"`

	// Positions is the number of KL positions.
	Positions int64 `json:"positions"`
	// Mean is ΣKL / Positions; MeanSE its standard error.
	Mean   float64 `json:"mean"`
	MeanSE float64 `json:"mean_se"`
	// Median is the 50th percentile (also in Percentiles.P50).
	Median float64 `json:"median"`
	// Percentiles of the per-position KL (interpolated as llama.cpp).
	Percentiles Percentiles `json:"percentiles"`

	// Paired statistics over the target tokens that have base log-probs
	// ("paired tokens"): every scored token in mode "scored", the scored
	// tokens of the first Rows windows in mode "compare_q".
	PairedTokens int64 `json:"paired_tokens"`
	// PPL is Q's PPL over the paired tokens; BasePPL the base's, from the
	// stored (possibly 16-bit) log-probs. Each ± llama.cpp's SE.
	PPL       float64 `json:"ppl"`
	PPLSE     float64 `json:"ppl_se"`
	BasePPL   float64 `json:"base_ppl"`
	BasePPLSE float64 `json:"base_ppl_se"`
	// NLLCorrelation is the Pearson correlation of per-token NLL of Q and
	// base (llama.cpp's "Cor(ln PPL(Q), ln PPL(base))").
	NLLCorrelation float64 `json:"nll_correlation"`
	// LnPPLRatio = ln(PPL_Q / PPL_base) = mean NLL_Q − mean NLL_base, with
	// SE sqrt(se_Q² + se_base² − 2 cov).
	LnPPLRatio   float64 `json:"ln_ppl_ratio"`
	LnPPLRatioSE float64 `json:"ln_ppl_ratio_se"`
	// PPLRatio = PPL_Q / PPL_base, SE = PPLRatio · LnPPLRatioSE.
	PPLRatio   float64 `json:"ppl_ratio"`
	PPLRatioSE float64 `json:"ppl_ratio_se"`
	// PPLDiff = PPL_Q − PPL_base, SE sqrt(seQ² + seB² − 2·PPL_Q·PPL_base·cov).
	PPLDiff   float64 `json:"ppl_diff"`
	PPLDiffSE float64 `json:"ppl_diff_se"`

	// DeltaP is Δp = q(target) − p_base(target) per paired token.
	DeltaP DeltaPStats `json:"delta_p"`

	// SameTop is the fraction of paired tokens whose most probable token is
	// the same under Q and base (llama.cpp "Same top p"), SE binomial
	// sqrt(r(1−r)/(n−1)).
	SameTop   float64 `json:"same_top"`
	SameTopSE float64 `json:"same_top_se"`
	// TopK lists, for each K, the mean overlap |top-K(Q) ∩ top-K(base)| / K
	// over paired tokens, with its SE.
	TopK []TopKAgreement `json:"top_k,omitempty"`
}

// DeltaPStats summarises Δp = q(target) − p_base(target).
type DeltaPStats struct {
	Mean   float64 `json:"mean"`
	MeanSE float64 `json:"mean_se"`
	// RMS = sqrt(mean Δp²); RMSSE = SE(mean Δp²) / (2·RMS) as llama.cpp.
	RMS         float64     `json:"rms"`
	RMSSE       float64     `json:"rms_se"`
	Percentiles Percentiles `json:"percentiles"`
}

// TopKAgreement is the mean top-K overlap of Q and base.
type TopKAgreement struct {
	K    int     `json:"k"`
	Rate float64 `json:"rate"`
	SE   float64 `json:"se"`
}

// Percentiles of a sample, linearly interpolated between order statistics
// as llama.cpp does (index fraction·(n−1)).
type Percentiles struct {
	Max  float64 `json:"max"`
	P999 float64 `json:"p99_9"`
	P99  float64 `json:"p99"`
	P95  float64 `json:"p95"`
	P90  float64 `json:"p90"`
	P75  float64 `json:"p75"`
	P50  float64 `json:"p50"`
	P25  float64 `json:"p25"`
	P10  float64 `json:"p10"`
	P5   float64 `json:"p5"`
	P1   float64 `json:"p1"`
	P01  float64 `json:"p0_1"`
	Min  float64 `json:"min"`
}

// Timing is wall-clock information; it is excluded from determinism checks
// and from every comparison.
type Timing struct {
	Seconds      float64 `json:"seconds"`
	TokensPerSec float64 `json:"tokens_per_sec"`
}

// IgnoredTensors counts the tensors of a checkpoint under one prefix that
// the architecture does not run ("vision tower", "model.visual.", 333).
type IgnoredTensors struct {
	What    string `json:"what"`
	Prefix  string `json:"prefix"`
	Tensors int    `json:"tensors"`
}
