/* cudrv_check.c: compiled by `make cuda-check` (never by cgo: testdata is
 * outside the package) with -Werror, once against the toolkit's cuda.h and
 * once with -DQPPL_CUDA13 against cuda13_driver.h. Each entry point of
 * ../cudrv.h is assigned from the header's declaration to a pointer of
 * cudrv.h's function type: a mismatch in any parameter or the result is
 * an incompatible-pointer error, so the own binding's prototypes are proven
 * ABI-identical to the header's. */
#ifdef QPPL_CUDA13
#include "cuda13_driver.h"
#else
#include <cuda.h>
#endif
#include "../cudrv.h"

#define QCU_CHECK(sym, ret, params, args) qcu_fn_##sym *check_##sym = &sym;
QCU_FUNCS(QCU_CHECK)

_Static_assert(sizeof(CUdeviceptr) == sizeof(qcu_devptr), "CUdeviceptr size");
_Static_assert(sizeof(CUresult) == sizeof(qcu_result), "CUresult size");
_Static_assert(CU_JIT_ERROR_LOG_BUFFER == QCU_JIT_ERROR_LOG_BUFFER, "CU_JIT_ERROR_LOG_BUFFER");
_Static_assert(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES == QCU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES");
_Static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == 16, "attribute value");
_Static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == 75, "attribute value");
_Static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == 76, "attribute value");
_Static_assert(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR == 39, "attribute value");
_Static_assert(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE == 36, "attribute value");
_Static_assert(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH == 37, "attribute value");
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == 2, "CUDA_ERROR_OUT_OF_MEMORY");
