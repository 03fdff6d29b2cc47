"""The reproducibility track: fused-upcast GEMM whose results are bitwise identical on any GPU.

Not a problem folder (no problem.py): the kernels and helpers the reproducible problems
(`repro_linear`, `repro_tp_row_linear`, `repro_decode_block`) and the benchmarks use.

- config.py: the reduction order (chunks of 512 k, each an fp32 FMA chain in order, chunk results
  added in order) and the fixed launch table, a pure function of (M, N, K);
- cpu_reference.py: the exact CPU emulation of that order (fp32 FMA via float64, TwoSum and
  round-to-odd);
- kernels.cu and cuda_kernels.py (CUDA C++ compiled by NVRTC through cuda_rtc.py; their
  launchers) and triton_gemm.py: the GPU kernels;
- gemm.py: `reproducible_matmul` / `reproducible_bmm`, dispatching by device and shape;
- linear.py: `ReproducibleLinear` (drop-in for nn.Linear) and `patch_linear_layers(model)`;
- allreduce.py: `deterministic_all_reduce` (rank-ordered fp32 sum through symmetric memory);
- ops.py: RMSNorm, softmax, SiLU, RoPE and exp from IEEE operations and reproducible sums.

Importing this package never imports Triton and works without CUDA.
"""
