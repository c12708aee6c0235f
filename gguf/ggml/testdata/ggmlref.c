// ggmlref: test helper for package ggml. It runs llama.cpp's own ggml code
// (libggml-base, linked at build time by ggml_test.go) on files:
//
//   ggmlref traits ID...                  one line per id: id name blck type_size is_quantized has_to_float
//   ggmlref quantize ID[,ID...] NROWS NPERROW SRC IMATRIX|- DST
//                                         ggml_quantize_chunk of NROWS rows of float32 from SRC
//                                         (IMATRIX: NPERROW float32 importances, or - for none)
//                                         into DST.ID, for each type in one process (the i-quants
//                                         share ggml_quantize_init's costly search tables)
//   ggmlref dequantize ID N SRC DST       the type's to_float (dequantize_row_<type>) of N elements
//
// Exit status 0 on success; errors on stderr.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The few declarations of ggml.h this helper needs (ggml's ABI).
typedef void (*ggml_to_float_t)(const void *x, float *y, int64_t k);
typedef void (*ggml_from_float_t)(const float *x, void *y, int64_t k);
struct ggml_type_traits {
	const char *type_name;
	int64_t blck_size;
	int64_t blck_size_interleave;
	size_t type_size;
	bool is_quantized;
	ggml_to_float_t to_float;
	ggml_from_float_t from_float_ref;
};
const struct ggml_type_traits *ggml_get_type_traits(int type);
void ggml_quantize_init(int type);
size_t ggml_quantize_chunk(int type, const float *src, void *dst, int64_t start, int64_t nrows,
			   int64_t n_per_row, const float *imatrix);
size_t ggml_row_size(int type, int64_t ne);

static void *readall(const char *path, size_t want) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	void *buf = malloc(want ? want : 1);
	if (fread(buf, 1, want, f) != want) {
		fprintf(stderr, "%s: short read (want %zu bytes)\n", path, want);
		exit(1);
	}
	fclose(f);
	return buf;
}

static void writeall(const char *path, const void *buf, size_t n) {
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

int main(int argc, char **argv) {
	if (argc >= 2 && strcmp(argv[1], "traits") == 0) {
		for (int i = 2; i < argc; i++) {
			int id = atoi(argv[i]);
			const struct ggml_type_traits *t = ggml_get_type_traits(id);
			printf("%d %s %lld %zu %d %d\n", id, t->type_name ? t->type_name : "-",
			       (long long)t->blck_size, t->type_size, t->is_quantized, t->to_float != NULL);
		}
		return 0;
	}
	if (argc == 8 && strcmp(argv[1], "quantize") == 0) {
		int64_t nrows = atoll(argv[3]), nper = atoll(argv[4]);
		float *src = readall(argv[5], (size_t)(nrows * nper) * sizeof(float));
		float *imat = strcmp(argv[6], "-") == 0 ? NULL : readall(argv[6], (size_t)nper * sizeof(float));
		for (char *ids = argv[2], *next; *ids; ids = next) {
			int id = (int)strtol(ids, &next, 10);
			if (*next == ',') next++;
			size_t n = (size_t)nrows * ggml_row_size(id, nper);
			void *dst = calloc(n ? n : 1, 1);
			ggml_quantize_init(id);
			size_t got = ggml_quantize_chunk(id, src, dst, 0, nrows, nper, imat);
			if (got != n) {
				fprintf(stderr, "quantize type %d: wrote %zu bytes, want %zu\n", id, got, n);
				return 1;
			}
			char path[4096];
			snprintf(path, sizeof path, "%s.%d", argv[7], id);
			writeall(path, dst, n);
			free(dst);
		}
		return 0;
	}
	if (argc == 6 && strcmp(argv[1], "dequantize") == 0) {
		int id = atoi(argv[2]);
		int64_t n = atoll(argv[3]);
		const struct ggml_type_traits *t = ggml_get_type_traits(id);
		if (id == 0) { // f32 has no to_float: the values are the bytes
			void *src = readall(argv[4], (size_t)n * sizeof(float));
			writeall(argv[5], src, (size_t)n * sizeof(float));
			return 0;
		}
		if (!t->to_float) {
			fprintf(stderr, "type %d has no to_float\n", id);
			return 1;
		}
		void *src = readall(argv[4], ggml_row_size(id, n));
		float *dst = malloc((size_t)n * sizeof(float) + 1);
		t->to_float(src, dst, n);
		writeall(argv[5], dst, (size_t)n * sizeof(float));
		return 0;
	}
	fprintf(stderr, "usage: ggmlref traits ID... | quantize ID NROWS NPERROW SRC IMATRIX|- DST | dequantize ID N SRC DST\n");
	return 2;
}
