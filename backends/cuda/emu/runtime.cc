// runtime.cc: grid/block loops and the fiber scheduler that runs one
// emulated CUDA thread per fiber, so that __syncthreads and warp shuffles
// are real barriers. Blocks of one launch run one after another on the
// calling OS thread; fibers of a block run in lane order until each reaches
// a barrier or exits (deterministic). Kernels registered with sync=0 run
// their threads as a plain loop (no fiber switches).
#include "shim.h"
#include "runtime.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

thread_local EmuFiber *emu_cur;

enum { EMU_RUNNABLE = 0, EMU_WAIT_BLOCK = 1, EMU_WAIT_WARP = 2, EMU_DONE = 3 };

static const size_t kStack = 128 * 1024;

// Per-OS-thread pool of fiber stacks (a cache; no device state lives here).
struct StackPool {
	void **stacks = nullptr;
	size_t n = 0;
	~StackPool() {
		for (size_t i = 0; i < n; i++) munmap((char *)stacks[i] - 4096, kStack + 4096);
		free(stacks);
	}
	void *get(size_t i) {
		if (i >= n) {
			size_t nn = i + 1 > 2 * n ? i + 1 : 2 * n;
			stacks = (void **)realloc(stacks, nn * sizeof(void *));
			for (size_t j = n; j < nn; j++) {
				char *m = (char *)mmap(nullptr, kStack + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (m == MAP_FAILED) abort();
				mprotect(m, 4096, PROT_NONE); // guard page below the stack
				stacks[j] = m + 4096;
			}
			n = nn;
		}
		return stacks[i];
	}
};
static thread_local StackPool pool;

struct LaunchState {
	emu_invoke_fn invoke;
	const uint64_t *args;
};
static thread_local LaunchState *cur_launch;

#if defined(__x86_64__)
extern "C" void emu_switch(void **save_sp, void *new_sp);

static void fiber_entry(void) {
	cur_launch->invoke(cur_launch->args);
	EmuFiber *f = emu_cur;
	f->state = EMU_DONE;
	f->blk->done++;
	emu_switch(&f->sp, f->blk->sched_sp);
	abort(); // never resumed
}

static void fiber_prepare(EmuFiber *f) {
	uintptr_t top = ((uintptr_t)f->stack + kStack) & ~(uintptr_t)15;
	uint64_t *sp = (uint64_t *)top;
	*--sp = 0;                                   // padding
	*--sp = (uint64_t)(uintptr_t)&fiber_entry;   // return address (16-aligned slot)
	for (int i = 0; i < 6; i++) *--sp = 0;       // rbp rbx r12 r13 r14 r15
	*--sp = 0x1F80ull | (0x037Full << 32);       // MXCSR, x87 control word
	f->sp = sp;
}
static inline void to_fiber(EmuBlock *b, EmuFiber *f) { emu_switch(&b->sched_sp, f->sp); }
static inline void to_sched(EmuFiber *f) { emu_switch(&f->sp, f->blk->sched_sp); }
#else
static void fiber_entry(void) {
	cur_launch->invoke(cur_launch->args);
	EmuFiber *f = emu_cur;
	f->state = EMU_DONE;
	f->blk->done++;
	swapcontext((ucontext_t *)f->uctx, (ucontext_t *)f->blk->sched_uctx);
	abort();
}
static void fiber_prepare(EmuFiber *f) {
	ucontext_t *u = (ucontext_t *)f->uctx;
	getcontext(u);
	u->uc_stack.ss_sp = f->stack;
	u->uc_stack.ss_size = kStack;
	u->uc_link = nullptr;
	makecontext(u, fiber_entry, 0);
}
static inline void to_fiber(EmuBlock *b, EmuFiber *f) { swapcontext((ucontext_t *)b->sched_uctx, (ucontext_t *)f->uctx); }
static inline void to_sched(EmuFiber *f) { swapcontext((ucontext_t *)f->uctx, (ucontext_t *)f->blk->sched_uctx); }
#endif

void emu_raise(const char *msg) {
	EmuBlock *b = emu_cur->blk;
	if (!b->error) b->error = msg;
}

void emu_block_barrier(void) {
	EmuFiber *f = emu_cur;
	EmuBlock *b = f->blk;
	if (!b->fibered) {
		emu_raise("__syncthreads in a kernel registered without barriers (sync=0)");
		return;
	}
	f->state = EMU_WAIT_BLOCK;
	b->arrived_block++;
	to_sched(f);
}

void emu_warp_barrier(void) {
	EmuFiber *f = emu_cur;
	EmuBlock *b = f->blk;
	if (!b->fibered) {
		emu_raise("warp shuffle or __syncwarp in a kernel registered without barriers (sync=0)");
		return;
	}
	f->state = EMU_WAIT_WARP;
	b->arrived_warp[f->linear / 32]++;
	to_sched(f);
}

// release wakes the fibers of every complete barrier.
static void release(EmuBlock *b) {
	unsigned n = b->nthreads;
	if (b->arrived_block > 0 && b->arrived_block == n - b->done) {
		for (unsigned i = 0; i < n; i++)
			if (b->fibers[i].state == EMU_WAIT_BLOCK) b->fibers[i].state = EMU_RUNNABLE;
		b->arrived_block = 0;
	}
	unsigned nw = (n + 31) / 32;
	for (unsigned w = 0; w < nw; w++) {
		if (b->arrived_warp[w] == 0) continue;
		unsigned lo = w * 32, hi = lo + 32 < n ? lo + 32 : n, live = 0;
		for (unsigned i = lo; i < hi; i++) live += b->fibers[i].state != EMU_DONE;
		if (b->arrived_warp[w] == live) {
			for (unsigned i = lo; i < hi; i++)
				if (b->fibers[i].state == EMU_WAIT_WARP) b->fibers[i].state = EMU_RUNNABLE;
			b->arrived_warp[w] = 0;
			b->warp_gen[w]++;
		}
	}
}

extern "C" const char *emu_launch(const EmuKernel *k, const uint64_t *args, unsigned gx, unsigned gy, unsigned gz,
				  unsigned bx, unsigned by, unsigned bz, size_t shared) {
	unsigned n = bx * by * bz;
	if (n == 0 || gx * gy * gz == 0) return nullptr;
	if (n > 1024) return "block has more than 1024 threads";
	LaunchState ls = {k->invoke, args};
	LaunchState *saved_launch = cur_launch;
	EmuFiber *saved_cur = emu_cur;
	cur_launch = &ls;
	EmuBlock *b = (EmuBlock *)calloc(1, sizeof(EmuBlock));
	EmuFiber *fibers = (EmuFiber *)calloc(n, sizeof(EmuFiber));
	// dynamic shared memory with NaN guard bands on both sides (also when the
	// launch asks for none): a kernel that indexes past what the host asked
	// for is an error, where a GPU would silently read or write garbage
	const size_t G = 256;
	unsigned char *dynbase = (unsigned char *)malloc(shared + 2 * G), *dyn = dynbase + G;
	auto dyn_guard_ok = [&]() {
		for (size_t i = 0; i < G; i++)
			if (dynbase[i] != 0xff || dyn[shared + i] != 0xff) return false;
		return true;
	};
	static const char *const kDynOverrun = "wrote outside its dynamic shared memory (more than the launch's sharedBytes)";
#if !defined(__x86_64__)
	ucontext_t sched_uc;
	ucontext_t *ucs = (ucontext_t *)calloc(n, sizeof(ucontext_t));
	b->sched_uctx = &sched_uc;
#endif
	b->bdim = {bx, by, bz};
	b->gdim = {gx, gy, gz};
	b->nthreads = n;
	b->fibered = k->sync;
	b->fibers = fibers;
	b->dyn_shared = dyn;
	const char *err = nullptr;
	for (unsigned z = 0; z < gz && !err; z++)
		for (unsigned y = 0; y < gy && !err; y++)
			for (unsigned x = 0; x < gx && !err; x++) {
				b->bid = {x, y, z};
				b->arrived_block = 0;
				b->done = 0;
				memset(b->arrived_warp, 0, sizeof b->arrived_warp);
				memset(b->warp_gen, 0, sizeof b->warp_gen);
				memset(dynbase, 0xff, shared + 2 * G); // uninitialized shared memory reads as NaN
				for (unsigned i = 0; i < n; i++) {
					EmuFiber *f = &fibers[i];
					f->linear = i;
					f->tid = {i % bx, (i / bx) % by, i / (bx * by)};
					f->blk = b;
					f->state = EMU_RUNNABLE;
				}
				if (!k->sync) {
					for (unsigned i = 0; i < n && !b->error; i++) {
						emu_cur = &fibers[i];
						k->invoke(args);
					}
					err = b->error;
					if (!err && !dyn_guard_ok()) err = kDynOverrun;
					continue;
				}
				for (unsigned i = 0; i < n; i++) {
					fibers[i].stack = pool.get(i);
#if !defined(__x86_64__)
					fibers[i].uctx = &ucs[i];
#endif
					fiber_prepare(&fibers[i]);
				}
				while (b->done < n && !b->error) {
					int progressed = 0;
					for (unsigned i = 0; i < n && !b->error; i++) {
						EmuFiber *f = &fibers[i];
						if (f->state != EMU_RUNNABLE) continue;
						emu_cur = f;
						to_fiber(b, f);
						progressed = 1;
						release(b);
					}
					if (!progressed && !b->error) b->error = "deadlock: threads wait at different barriers (divergent __syncthreads or shuffle)";
				}
				err = b->error;
				if (!err && !dyn_guard_ok()) err = kDynOverrun;
			}
	cur_launch = saved_launch;
	emu_cur = saved_cur;
#if !defined(__x86_64__)
	free(ucs);
#endif
	free(dynbase);
	free(fibers);
	free(b);
	return err;
}

static inline float load_elem(const void *p, size_t i, int t) {
	if (t == 0) return ((const float *)p)[i];
	unsigned short h = ((const unsigned short *)p)[i];
	if (t == 1) return __bfloat162float(__ushort_as_bfloat16(h));
	return __half2float(__ushort_as_half(h));
}

extern "C" void emu_gemm(int M, int N, int K, const void *A, const void *B, int t, float *C, int accumulate) {
	float *bf = (float *)malloc((size_t)N * K * sizeof(float));
	float *af = (float *)malloc((size_t)K * sizeof(float));
	for (size_t i = 0; i < (size_t)N * K; i++) bf[i] = load_elem(B, i, t);
	for (int m = 0; m < M; m++) {
		for (int k = 0; k < K; k++) af[k] = load_elem(A, (size_t)m * K + k, t);
		float *c = C + (size_t)m * N;
		for (int n = 0; n < N; n++) {
			const float *b = bf + (size_t)n * K;
			float s = 0.0f;
			for (int k = 0; k < K; k++) s += af[k] * b[k];
			c[n] = accumulate ? c[n] + s : s;
		}
	}
	free(af);
	free(bf);
}

extern "C" void emu_gemm_batched(int M, int N, int K, const void *A, int lda, long long sA, const void *B, int ldb,
				 long long sB, int transB, int t, float *C, int ldc, long long sC, int batch, float alpha,
				 int accumulate) {
	float *bf = (float *)malloc((size_t)N * K * sizeof(float)); // op(B_b) as [N][K]
	float *af = (float *)malloc((size_t)K * sizeof(float));
	for (int b = 0; b < batch; b++) {
		for (int n = 0; n < N; n++)
			for (int k = 0; k < K; k++) {
				size_t i = transB ? (size_t)n * ldb + k : (size_t)k * ldb + n;
				bf[(size_t)n * K + k] = load_elem(B, (size_t)b * sB + i, t);
			}
		for (int m = 0; m < M; m++) {
			for (int k = 0; k < K; k++) af[k] = load_elem(A, (size_t)b * sA + (size_t)m * lda + k, t);
			float *c = C + (size_t)b * sC + (size_t)m * ldc;
			for (int n = 0; n < N; n++) {
				const float *bb = bf + (size_t)n * K;
				float s = 0.0f;
				for (int k = 0; k < K; k++) s += af[k] * bb[k];
				s *= alpha;
				c[n] = accumulate ? c[n] + s : s;
			}
		}
	}
	free(af);
	free(bf);
}
