// llamacpp helper: runs llama.cpp's own code (libllama and libggml-base from
// the npm package @node-llama-cpp/linux-x64@3.22.1) for qppl's tests.
// Compiled by package internal/llamacpp (Build) against the library.
//
//   helper quantize IN OUT FTYPE         llama_model_quantize (exit 3: llama.cpp refused)
//   helper nll MODEL WINDOWS OUT         per-token NLL of every window (llama_decode, llama_get_logits)
//                                        WINDOWS: int32 n, then per window int32 T, int32 first, T int32 ids
//                                        OUT: float64 NLL of targets first..T-1 of each window, in order
//   helper dequantize TYPE N SRC DST     ggml's to_float (dequantize_row_<type>) of N elements to float32
//   helper traits ID...                  one line per id: id name blck_size type_size
//
// Only the declarations needed are written here. Structs llama.cpp passes by
// value whose layout changes between versions (model, context and quantize
// parameters) are obtained from llama.cpp's own *_default_params() into an
// oversized buffer and passed back whole: only their leading fields, stable
// across versions, are set.
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct params_blob { _Alignas(16) unsigned char b[2048]; };

struct llama_model;
struct llama_context;
struct llama_vocab;
typedef struct llama_batch {
	int32_t n_tokens;
	int32_t *token;
	float *embd;
	int32_t *pos;
	int32_t *n_seq_id;
	int32_t **seq_id;
	int8_t *logits;
} llama_batch;

typedef void (*ggml_log_callback)(int level, const char *text, void *user);
void llama_log_set(ggml_log_callback cb, void *user);
void llama_backend_init(void);
void ggml_backend_load_all_from_path(const char *dir);
struct params_blob llama_model_default_params(void);
struct params_blob llama_context_default_params(void);
struct params_blob llama_model_quantize_default_params(void);
struct llama_model *llama_model_load_from_file(const char *path, struct params_blob params);
void llama_model_free(struct llama_model *m);
struct llama_context *llama_init_from_model(struct llama_model *m, struct params_blob params);
void llama_free(struct llama_context *c);
int32_t llama_decode(struct llama_context *c, llama_batch batch);
float *llama_get_logits(struct llama_context *c);
const struct llama_vocab *llama_model_get_vocab(const struct llama_model *m);
int32_t llama_vocab_n_tokens(const struct llama_vocab *v);
uint32_t llama_model_quantize(const char *in, const char *out, const void *params);

typedef void (*ggml_to_float_t)(const void *x, float *y, int64_t k);
struct ggml_type_traits {
	const char *type_name;
	int64_t blck_size;
	int64_t blck_size_interleave;
	size_t type_size;
	bool is_quantized;
	ggml_to_float_t to_float;
};
const struct ggml_type_traits *ggml_get_type_traits(int type);
int64_t ggml_blck_size(int type);
size_t ggml_type_size(int type);
const char *ggml_type_name(int type);

static void quiet(int level, const char *text, void *user) {
	(void)user;
	if (level == 4) // GGML_LOG_LEVEL_ERROR
		fputs(text, stderr);
}

static void *readfile(const char *path, size_t *n) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *buf = malloc(sz ? sz : 1);
	if (fread(buf, 1, sz, f) != (size_t)sz) {
		fprintf(stderr, "%s: short read\n", path);
		exit(1);
	}
	fclose(f);
	*n = sz;
	return buf;
}

static int cmd_quantize(const char *in, const char *out, int ftype) {
	struct params_blob p = llama_model_quantize_default_params();
	int32_t nthread = 2;
	memcpy(p.b, &nthread, 4);       // nthread
	memcpy(p.b + 4, &ftype, 4);     // ftype
	uint32_t rc = llama_model_quantize(in, out, p.b);
	return rc == 0 ? 0 : 3;
}

static int cmd_nll(const char *model_path, const char *win_path, const char *out_path) {
	struct params_blob mp = llama_model_default_params();
	struct llama_model *model = llama_model_load_from_file(model_path, mp);
	if (!model) {
		fprintf(stderr, "llama_model_load_from_file(%s) failed\n", model_path);
		return 1;
	}
	int32_t nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
	size_t n;
	int32_t *w = readfile(win_path, &n);
	FILE *out = fopen(out_path, "wb");
	if (!out) {
		perror(out_path);
		return 1;
	}
	int32_t nwin = w[0], *p = w + 1;
	for (int32_t k = 0; k < nwin; k++) {
		int32_t T = p[0], first = p[1];
		int32_t *ids = p + 2;
		p += 2 + T;
		struct params_blob cp = llama_context_default_params();
		uint32_t nctx = (uint32_t)T;
		memcpy(cp.b + 0, &nctx, 4);  // n_ctx
		memcpy(cp.b + 4, &nctx, 4);  // n_batch
		memcpy(cp.b + 8, &nctx, 4);  // n_ubatch
		struct llama_context *ctx = llama_init_from_model(model, cp);
		if (!ctx) {
			fprintf(stderr, "llama_init_from_model failed (window %d)\n", k);
			return 1;
		}
		int32_t *pos = malloc(T * 4), *nseq = malloc(T * 4), **seq = malloc(T * sizeof(int32_t *));
		int8_t *lg = malloc(T);
		static int32_t seq0 = 0;
		for (int32_t i = 0; i < T; i++) {
			pos[i] = i;
			nseq[i] = 1;
			seq[i] = &seq0;
			lg[i] = 1;
		}
		llama_batch b = {T, ids, NULL, pos, nseq, seq, lg};
		int32_t rc = llama_decode(ctx, b);
		if (rc != 0) {
			fprintf(stderr, "llama_decode: %d (window %d)\n", rc, k);
			return 1;
		}
		float *logits = llama_get_logits(ctx);
		for (int32_t t = first; t < T; t++) {
			const float *row = logits + (size_t)(t - 1) * nv;
			double mx = row[0];
			for (int32_t j = 1; j < nv; j++)
				if (row[j] > mx)
					mx = row[j];
			double s = 0;
			for (int32_t j = 0; j < nv; j++)
				s += exp((double)row[j] - mx);
			double nll = -((double)row[ids[t]] - mx - log(s));
			fwrite(&nll, 8, 1, out);
		}
		free(pos);
		free(nseq);
		free(seq);
		free(lg);
		llama_free(ctx);
	}
	fclose(out);
	llama_model_free(model);
	return 0;
}

static int cmd_dequantize(int type, long long nel, const char *src, const char *dst) {
	const struct ggml_type_traits *tr = ggml_get_type_traits(type);
	if (!tr || !tr->to_float) {
		fprintf(stderr, "type %d has no to_float\n", type);
		return 1;
	}
	size_t n;
	void *raw = readfile(src, &n);
	size_t want = (size_t)(nel / tr->blck_size) * tr->type_size;
	if (nel % tr->blck_size != 0 || n != want) {
		fprintf(stderr, "%s: %zu bytes for %lld elements of %s, want %zu\n", src, n, nel, tr->type_name, want);
		return 1;
	}
	float *y = malloc(nel * 4);
	tr->to_float(raw, y, nel);
	FILE *f = fopen(dst, "wb");
	if (!f || fwrite(y, 4, nel, f) != (size_t)nel) {
		perror(dst);
		return 1;
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv) {
	llama_log_set(quiet, NULL);
	if (argc >= 2 && !strcmp(argv[1], "traits")) {
		for (int i = 2; i < argc; i++) {
			int id = atoi(argv[i]);
			printf("%d %s %lld %zu\n", id, ggml_type_name(id), (long long)ggml_blck_size(id), ggml_type_size(id));
		}
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "dequantize"))
		return cmd_dequantize(atoi(argv[2]), atoll(argv[3]), argv[4], argv[5]);
	// The CPU backend is a plugin (libggml-cpu-<variant>.so) beside the
	// libraries: QPPL_LLAMACPP_LIB names their directory.
	const char *lib = getenv("QPPL_LLAMACPP_LIB");
	if (!lib) {
		fprintf(stderr, "QPPL_LLAMACPP_LIB is not set\n");
		return 2;
	}
	ggml_backend_load_all_from_path(lib);
	llama_backend_init();
	if (argc == 5 && !strcmp(argv[1], "quantize"))
		return cmd_quantize(argv[2], argv[3], atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "nll"))
		return cmd_nll(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: helper quantize IN OUT FTYPE | nll MODEL WINDOWS OUT | dequantize TYPE N SRC DST | traits ID...\n");
	return 2;
}
