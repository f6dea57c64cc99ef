/* Hand-written C reference kernels for one CLP propagation step (benchmarks/throughput.py).
 *
 * CSR adjacency (rows = receivers, sorted), row-major (n, K) float32 blocks, OpenMP threads.
 *   factored: out[r, k] = left[r, k] * sum_{e in row r} val[e] * right[col[e], k] * x[col[e], k]
 *   edgewise: out[r, k] = sum_{e in row r} E[e, k] * x[col[e], k]
 *   triad:    a[i] = b[i] + s * c[i]            (STREAM triad, 12 bytes per element)
 * Compiled at benchmark time: gcc -O3 -march=native -fopenmp -shared -fPIC.
 */
#include <stdint.h>
#include <string.h>
#include <omp.h>

#define ROW_LOOP_FACTORED(KK)                                                          \
  for (int64_t r = 0; r < n; r++) {                                                    \
    float acc[KK];                                                                     \
    for (int k = 0; k < KK; k++) acc[k] = 0.f;                                         \
    for (int64_t e = indptr[r]; e < indptr[r + 1]; e++) {                              \
      const float v = val[e];                                                          \
      const float *yr = y + (int64_t)col[e] * KK;                                      \
      for (int k = 0; k < KK; k++) acc[k] += v * yr[k];                                \
    }                                                                                  \
    for (int k = 0; k < KK; k++) out[r * KK + k] = left[r * KK + k] * acc[k];          \
  }

#define ROW_LOOP_EDGEWISE(KK)                                                          \
  for (int64_t r = 0; r < n; r++) {                                                    \
    float acc[KK];                                                                     \
    for (int k = 0; k < KK; k++) acc[k] = 0.f;                                         \
    for (int64_t e = indptr[r]; e < indptr[r + 1]; e++) {                              \
      const float *w = E + e * KK;                                                     \
      const float *xr = x + (int64_t)col[e] * KK;                                      \
      for (int k = 0; k < KK; k++) acc[k] += w[k] * xr[k];                             \
    }                                                                                  \
    for (int k = 0; k < KK; k++) out[r * KK + k] = acc[k];                             \
  }

/* generic K: accumulate directly into out (zeroed first) */
static void factored_generic(int64_t n, int64_t K, const int64_t *indptr, const int32_t *col,
                             const float *val, const float *left, const float *y, float *out) {
  #pragma omp for schedule(dynamic, 512)
  for (int64_t r = 0; r < n; r++) {
    float *o = out + r * K;
    memset(o, 0, K * sizeof(float));
    for (int64_t e = indptr[r]; e < indptr[r + 1]; e++) {
      const float v = val[e];
      const float *yr = y + (int64_t)col[e] * K;
      for (int64_t k = 0; k < K; k++) o[k] += v * yr[k];
    }
    for (int64_t k = 0; k < K; k++) o[k] *= left[r * K + k];
  }
}

void clp_factored(int64_t n, int64_t K, const int64_t *indptr, const int32_t *col, const float *val,
                  const float *left, const float *right, const float *x, float *y, float *out, int nthreads) {
  #pragma omp parallel num_threads(nthreads)
  {
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < n * K; i++) y[i] = right[i] * x[i];
    switch (K) {
      case 2: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_FACTORED(2)
        break; }
      case 5: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_FACTORED(5)
        break; }
      case 8: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_FACTORED(8)
        break; }
      case 40: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_FACTORED(40)
        break; }
      default:
        factored_generic(n, K, indptr, col, val, left, y, out);
    }
  }
}

void clp_edgewise(int64_t n, int64_t K, const int64_t *indptr, const int32_t *col, const float *E,
                  const float *x, float *out, int nthreads) {
  #pragma omp parallel num_threads(nthreads)
  {
    switch (K) {
      case 2: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_EDGEWISE(2)
        break; }
      case 5: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_EDGEWISE(5)
        break; }
      case 40: {
        #pragma omp for schedule(dynamic, 512)
        ROW_LOOP_EDGEWISE(40)
        break; }
      default: {
        #pragma omp for schedule(dynamic, 512)
        for (int64_t r = 0; r < n; r++) {
          float *o = out + r * K;
          memset(o, 0, K * sizeof(float));
          for (int64_t e = indptr[r]; e < indptr[r + 1]; e++) {
            const float *w = E + e * K;
            const float *xr = x + (int64_t)col[e] * K;
            for (int64_t k = 0; k < K; k++) o[k] += w[k] * xr[k];
          }
        }
      }
    }
  }
}

void triad(int64_t n, float *a, const float *b, const float *c, float s, int nthreads) {
  #pragma omp parallel for num_threads(nthreads) schedule(static)
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
