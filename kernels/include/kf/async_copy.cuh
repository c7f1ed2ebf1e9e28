// Asynchronous global -> shared copies (cp.async, sm_80+): the loads of a multi-stage pipeline are
// issued, committed as a group, and waited for STAGES - 2 groups later, so copies overlap the math.
#ifndef KF_ASYNC_COPY_CUH
#define KF_ASYNC_COPY_CUH

#include "kf/shared_memory.cuh"

// 16 bytes, bypassing L1 (.cg): operands are re-read from shared memory, never from L1.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_addr(dst)), "l"(src));
}
// As cp_async16, but writes 16 zero bytes when !valid (src-size 0): padding without a branch.
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most PENDING_ committed groups are still in flight (the trailing underscore keeps
// the name clear of the kernels' -D macros).
template <int PENDING_> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING_));
}

#endif  // KF_ASYNC_COPY_CUH
