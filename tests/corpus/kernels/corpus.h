/* Shared definitions for the clang-compiled gfx950 test corpus (the .c files beside this header).
 *
 * The kernels are plain C (not OpenCL: clang 22's OpenCL mode adds a callable
 * `__clang_ocl_kern_imp_<name>` function per kernel to .text).  Address spaces are
 * spelled with attributes: 1 = global memory, 3 = LDS.  Each kernel states its maximum
 * workgroup size with amdgpu_flat_work_group_size, which becomes
 * `.max_flat_workgroup_size` in the code-object metadata.
 */
#ifndef FLYASM_CORPUS_H
#define FLYASM_CORPUS_H

#define GLOBAL __attribute__((address_space(1)))
#define LDS __attribute__((address_space(3)))
/* LDS arrays cannot have initialisers. */
#define LDS_ARRAY(type, name, count) LDS static type name[count] __attribute__((loader_uninitialized))
#define KERNEL(max_block) __attribute__((amdgpu_kernel, amdgpu_flat_work_group_size(1, max_block))) void

typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
typedef __bf16 bf16x2 __attribute__((ext_vector_type(2)));
typedef _Float16 f16x8 __attribute__((ext_vector_type(8)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
typedef short i16x4 __attribute__((ext_vector_type(4)));
typedef unsigned short u16x8 __attribute__((ext_vector_type(8)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef int i32x4 __attribute__((ext_vector_type(4)));
typedef unsigned u32x4 __attribute__((ext_vector_type(4)));
typedef unsigned u32x2 __attribute__((ext_vector_type(2)));

static inline unsigned thread_id(void) { return __builtin_amdgcn_workitem_id_x(); }
static inline unsigned group_id(void) { return __builtin_amdgcn_workgroup_id_x(); }

/* OpenCL's barrier(CLK_LOCAL_MEM_FENCE): release fence, s_barrier, acquire fence.
 * The fences make LLVM wait for outstanding memory operations (including LDS-DMA loads,
 * which it does not otherwise wait for before a dependent ds_read). */
static inline void workgroup_barrier(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

#endif
