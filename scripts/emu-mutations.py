#!/usr/bin/env python3
# The mutations of docs/GPU.md ("Mutations"): each one is applied to the source, the emulated
# device's test programs are rebuilt and run under the three schedules, the failing tests are
# printed, and the source is restored (also on error or Ctrl-C). Nothing is committed.
#   scripts/emu-mutations.py NAME [BUILD_DIR]     (BUILD_DIR: a configured build with
#                                                  MOESPLIT_CUDA_EMU=ON, default build/release)
#   scripts/emu-mutations.py --list
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(ROOT, 'build', 'release')
M = {
 'M1_mla_no_syncthreads': ('gpu_kernels/mla_attention.cu',
    '    ScoreTile<T>(q_s, tile_s, p_s, a.scale, n_rows);\n    __syncthreads();\n',
    '    ScoreTile<T>(q_s, tile_s, p_s, a.scale, n_rows);\n',
    ['test_gpu_kernels_emu:GpuMlaAttention.*', 'test_cuda_backend_emu:*Mla*']),
 'M2_mla_shuffle_offset': ('gpu_kernels/mla_attention.cu',
    '      v += __shfl_xor_sync(0xffffffffu, v, 4);\n',
    '      v += __shfl_xor_sync(0xffffffffu, v, 8);\n',
    ['test_gpu_kernels_emu:GpuMlaAttention.*', 'test_cuda_backend_emu:*Mla*']),
 'M3_mla_tile_loop_off_by_one': ('gpu_kernels/mla_attention.cu',
    'for (int64_t tile0 = begin; tile0 < end; tile0 += kTs) {',
    'for (int64_t tile0 = begin; tile0 < end - 1; tile0 += kTs) {',
    ['test_gpu_kernels_emu:GpuMlaAttention.*', 'test_cuda_backend_emu:*Mla*']),
 'M4_no_join_wait': ('core/engine/cuda_backend.cc',
    '  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(lanes_[0].stream, join_event_, 0));\n', '',
    ['test_cuda_backend_emu:*', 'test_hybrid_emu:*']),
 'M5_blocksum_no_syncthreads': ('gpu_kernels/ops.cu',
    '  if (lane == 0) shm[warp] = v;\n  __syncthreads();\n  v = WarpSum(',
    '  if (lane == 0) shm[warp] = v;\n  v = WarpSum(',
    ['test_gpu_kernels_emu:GpuOps.*']),
 'M6_qgemv_reduction_offset': ('gpu_kernels/qgemv.cu',
    'for (int off = kWarp / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);',
    'for (int off = kWarp / 4; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);',
    ['test_gpu_kernels_emu:GpuQuant/QGemv.*:QGemvIdsGpu.*']),
 'M8_qgemv_no_syncwarp': ('gpu_kernels/qgemv.cu',
    '    const int head = StageChunk(wrow + b0 * G::kBlockBytes, nb * G::kBlockBytes, stage[warp], lane);\n    __syncwarp();\n',
    '    const int head = StageChunk(wrow + b0 * G::kBlockBytes, nb * G::kBlockBytes, stage[warp], lane);\n',
    ['test_gpu_kernels_emu:GpuQuant/QGemv.*:QGemvIdsGpu.*']),
 'M7_no_fork_wait': ('core/engine/cuda_backend.cc',
    '  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(lanes_[1].stream, fork_event_, 0));\n', '',
    ['test_cuda_backend_emu:*', 'test_hybrid_emu:*']),
}
PATHS={'test_gpu_kernels_emu':'tests/gpu_kernels/test_gpu_kernels_emu','test_cuda_backend_emu':'tests/core/engine/test_cuda_backend_emu','test_hybrid_emu':'tests/core/engine/test_hybrid_emu'}
if len(sys.argv) < 2 or sys.argv[1] == '--list':
    print('\n'.join(M))
    sys.exit(0)
name=sys.argv[1]
f,old,new,runs=M[name]
p=os.path.join(ROOT,f); s=open(p).read()
assert s.count(old)==1, (name, s.count(old))
open(p,'w').write(s.replace(old,new))
try:
    targets=sorted(set(r.split(':')[0] for r in runs))
    r=subprocess.run(['cmake','--build',B,'--target']+targets,cwd=B,capture_output=True,text=True)
    if r.returncode: print(r.stdout[-3000:]); raise SystemExit('build failed')
    for run in runs:
        t,filt=run.split(':',1)
        for sch in ['rotate','inorder','reverse']:
            env=dict(os.environ, MOESPLIT_CUDA_EMU_SCHEDULE=sch)
            r=subprocess.run([os.path.join(B,PATHS[t]),'--gtest_filter='+filt],cwd=B,capture_output=True,text=True,env=env,timeout=900)
            failed=sorted(set(x for x in re.findall(r'^\[  FAILED  \] (\S+)', r.stdout, re.M) if not x.isdigit()))
            passed=len(re.findall(r'^\[       OK \]', r.stdout, re.M))
            crash = '' if r.returncode in (0,1) else ' rc=%d'%r.returncode
            print(f'{name} {t} [{sch}]: {len(failed)} failed, {passed} passed{crash}: {" ".join(failed)}', flush=True)
finally:
    open(p,'w').write(s)
