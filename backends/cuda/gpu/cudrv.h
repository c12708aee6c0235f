// cudrv.h: the project's own prototypes of the CUDA driver entry points the
// gpu package calls (build tag cudaown), written from the driver API
// reference. Only versioned symbols that are stable across toolkits 11.x,
// 12.x and 13.x are used: the _v2 names that cuda.h's macros select since
// CUDA 3.2/4.0 (cuMemAlloc_v2, cuMemcpyHtoD_v2, ...) and functions whose
// signature never changed. Functions whose signature changed in 13.0
// (cuCtxCreate -> cuCtxCreate_v4, cuMemAdvise, cuMemPrefetchAsync,
// cuGraphGetEdges) are deliberately not used: the backend needs only the
// primary context.
//
// The types are this header's own; they are ABI-identical to cuda.h's
// (CUresult and the enums are C enums without negative values, i.e.
// unsigned int under the System V ABI; CUdeviceptr is unsigned long long
// on 64-bit hosts; handles are pointers to the same incomplete structs).
// `make cuda-check` proves it by compiling testdata/cudrv_check.c, which
// assigns &<function> from cuda.h to a pointer of this header's type with
// -Werror, against the toolkit's cuda.h and against
// testdata/cuda13_driver.h (the 13.x prototypes).
#ifndef QPPL_CUDRV_H
#define QPPL_CUDRV_H
#include <stddef.h>

typedef unsigned int qcu_result;       // CUresult
typedef int qcu_device;                // CUdevice
typedef unsigned long long qcu_devptr; // CUdeviceptr
typedef unsigned int qcu_attr;         // CUdevice_attribute
typedef unsigned int qcu_jit_option;   // CUjit_option
typedef struct CUctx_st *qcu_context;  // CUcontext
typedef struct CUmod_st *qcu_module;   // CUmodule
typedef struct CUfunc_st *qcu_function; // CUfunction
typedef struct CUstream_st *qcu_stream; // CUstream

// QCU_FUNCS(X) lists every entry point: X(symbol, return type,
// parameter list, argument names).
#define QCU_FUNCS(X)                                                                                                   \
	X(cuInit, qcu_result, (unsigned int flags), (flags))                                                           \
	X(cuDriverGetVersion, qcu_result, (int *v), (v))                                                               \
	X(cuGetErrorName, qcu_result, (qcu_result e, const char **s), (e, s))                                          \
	X(cuGetErrorString, qcu_result, (qcu_result e, const char **s), (e, s))                                        \
	X(cuDeviceGetCount, qcu_result, (int *n), (n))                                                                 \
	X(cuDeviceGet, qcu_result, (qcu_device * d, int ordinal), (d, ordinal))                                        \
	X(cuDeviceGetName, qcu_result, (char *name, int len, qcu_device d), (name, len, d))                            \
	X(cuDeviceGetAttribute, qcu_result, (int *v, qcu_attr a, qcu_device d), (v, a, d))                             \
	X(cuDeviceTotalMem_v2, qcu_result, (size_t * bytes, qcu_device d), (bytes, d))                                 \
	X(cuDevicePrimaryCtxRetain, qcu_result, (qcu_context * c, qcu_device d), (c, d))                               \
	X(cuDevicePrimaryCtxRelease_v2, qcu_result, (qcu_device d), (d))                                               \
	X(cuCtxSetCurrent, qcu_result, (qcu_context c), (c))                                                           \
	X(cuCtxSynchronize, qcu_result, (void), ())                                                                    \
	X(cuModuleLoadDataEx, qcu_result,                                                                              \
	  (qcu_module * m, const void *image, unsigned int n, qcu_jit_option *opts, void **vals),                     \
	  (m, image, n, opts, vals))                                                                                   \
	X(cuModuleGetFunction, qcu_result, (qcu_function * f, qcu_module m, const char *name), (f, m, name))           \
	X(cuModuleUnload, qcu_result, (qcu_module m), (m))                                                             \
	X(cuMemAlloc_v2, qcu_result, (qcu_devptr * p, size_t bytes), (p, bytes))                                       \
	X(cuMemFree_v2, qcu_result, (qcu_devptr p), (p))                                                               \
	X(cuMemcpyHtoD_v2, qcu_result, (qcu_devptr dst, const void *src, size_t n), (dst, src, n))                     \
	X(cuMemcpyDtoH_v2, qcu_result, (void *dst, qcu_devptr src, size_t n), (dst, src, n))                           \
	X(cuMemGetInfo_v2, qcu_result, (size_t * free_b, size_t *total_b), (free_b, total_b))                          \
	X(cuLaunchKernel, qcu_result,                                                                                  \
	  (qcu_function f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,        \
	   unsigned int bz, unsigned int shared, qcu_stream s, void **params, void **extra),                          \
	  (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))

// One function type per entry point: qcu_fn_<symbol>.
#define QCU_TYPEDEF(sym, ret, params, args) typedef ret qcu_fn_##sym params;
QCU_FUNCS(QCU_TYPEDEF)
#undef QCU_TYPEDEF

// JIT options (CUjit_option values, unchanged since CUDA 4.0).
#define QCU_JIT_ERROR_LOG_BUFFER 5
#define QCU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

#endif
