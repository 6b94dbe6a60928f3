/* SPDX-License-Identifier: Apache-2.0 */
/* A GEMM through cuBLAS writes C, then a kernel reads all of C. initcheck
 * reports every read as uninitialised while it does not see the library's
 * stores (on sm_90 its GEMMs store through the tensor memory accelerator);
 * device-check.sh runs this probe to know whether it does. */
#include <cstdio>
#include <cublas_v2.h>
#include <cuda_fp16.h>

__global__ void read_c(const float *c, float *out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count)
    out[i] = 2.f * c[i];
}

int main() {
  const int m = 320, n = 1536, k = 1024; /* a dense-path shape */
  __half *a, *b;
  float *c, *out;
  if (cudaMalloc(&a, m * k * 2) != cudaSuccess ||
      cudaMalloc(&b, k * n * 2) != cudaSuccess ||
      cudaMalloc(&c, m * n * 4) != cudaSuccess ||
      cudaMalloc(&out, m * n * 4) != cudaSuccess)
    return 2;
  cudaMemset(a, 0, m * k * 2);
  cudaMemset(b, 0, k * n * 2);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    return 2;
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t st =
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16F, n,
                   a, CUDA_R_16F, k, &zero, c, CUDA_R_32F, n,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  read_c<<<(m * n + 255) / 256, 256>>>(c, out, m * n);
  const cudaError_t err = cudaDeviceSynchronize();
  printf("cublas probe: gemm %d, %s\n", (int)st, cudaGetErrorString(err));
  cublasDestroy(h);
  return st == CUBLAS_STATUS_SUCCESS && err == cudaSuccess ? 0 : 1;
}
