// Fused CSR kernels for jaxclp, called from JAX through the XLA FFI (CPU only).
//
//   csr_mm:        out[r, k] = sum_{e in row r} values[e] * y[indices[e], k]
//   csr_mm_scaled: out[r, k] = left[r, k] * sum_{e in row r} values[e] * right[s, k] * y[s, k],  s = indices[e]
//   csr_sddmm:     out[e] = sum_k g[r, k] * y[indices[e], k]  for every e in row r (the gradient of csr_mm with
//                  respect to its values: a sampled dense-dense product over the nonzeros)
//
// values (m,), indices (m,) int32, indptr (rows + 1,) int32, y (cols, K), left (rows, K), right (cols, K),
// out (rows, K); float32 or float64 (all floats of one call share the dtype), any K.
//
// Threads: rows are split into chunks of about equal cost (nonzeros + rows) and run on XLA's own CPU thread
// pool (xla::ffi::ThreadPool). The calling thread claims chunks too (an atomic counter), and only ever waits
// for chunks another thread has already started, so a busy or size-1 pool cannot deadlock: unclaimed work is
// done by the caller. Helper tasks that start late find no chunk and return without touching any buffer.
//
// The module is a plain CPython extension exposing `registrations()` -> {name: PyCapsule(handler)}.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

#ifndef JAXCLP_PREFETCH
#define JAXCLP_PREFETCH 32
#endif
constexpr int kPrefetch = JAXCLP_PREFETCH;  // prefetch distance in edges for K > kBlock (0: off)

// Columns [k0, k0 + KB) of row r, accumulated in registers. z is the gathered operand with row stride zK
// (already offset to the column block); out and left have row stride K. kScaled: times left[r, k].
template <typename T, int KB, bool kScaled, bool kPf>
inline void row_cols(int64_t r, const T* __restrict z, int64_t zK, int64_t k0, int64_t K,
                     const int32_t* __restrict indptr, const int32_t* __restrict idx, const T* __restrict val,
                     const T* __restrict left, T* __restrict out, int64_t e_end) {
  T acc[KB];
  for (int k = 0; k < KB; ++k) acc[k] = T(0);
  const int32_t e1 = indptr[r + 1];
  for (int32_t e = indptr[r]; e < e1; ++e) {
    if constexpr (kPf && kPrefetch > 0) {  // the gathers are latency bound when z outgrows the caches
      if (e + kPrefetch < e_end) __builtin_prefetch(z + static_cast<int64_t>(idx[e + kPrefetch]) * zK);
    }
    const T v = val[e];
    const T* __restrict zs = z + static_cast<int64_t>(idx[e]) * zK;
    for (int k = 0; k < KB; ++k) acc[k] += v * zs[k];
  }
  T* __restrict o = out + r * K + k0;
  if constexpr (kScaled) {
    const T* __restrict l = left + r * K + k0;
    for (int k = 0; k < KB; ++k) o[k] = l[k] * acc[k];
  } else {
    for (int k = 0; k < KB; ++k) o[k] = acc[k];
  }
}

template <typename T, int KB, bool kScaled, bool kPf>
void rows_cols(int64_t r0, int64_t r1, const T* z, int64_t zK, int64_t k0, int64_t K, const int32_t* indptr,
               const int32_t* idx, const T* val, const T* left, T* out) {
  const int64_t e_end = indptr[r1];
  for (int64_t r = r0; r < r1; ++r)
    row_cols<T, KB, kScaled, kPf>(r, z, zK, k0, K, indptr, idx, val, left, out, e_end);
}

// K > kBlock: the gathered operand is stored column-blocked (block b = columns [16 b, 16 b + w) of all
// `cols` rows, contiguous, row stride w), so one pass over the rows gathers one 64-byte line per edge from
// a block of cols * w entries instead of strided pieces of the whole (cols, K) array.
#ifndef JAXCLP_BLOCK
#define JAXCLP_BLOCK 16
#endif
constexpr int kBlock = JAXCLP_BLOCK;

template <typename T, bool kScaled>
void rows_blocked(int64_t r0, int64_t r1, int64_t cols, int64_t K, const int32_t* indptr, const int32_t* idx,
                  const T* val, const T* zb, const T* left, T* out) {
  for (int64_t k0 = 0; k0 < K; k0 += kBlock) {
    const int64_t w = std::min<int64_t>(kBlock, K - k0);
    const T* z = zb + cols * k0;
#define JAXCLP_W(KK) \
  case KK:           \
    rows_cols<T, KK, kScaled, true>(r0, r1, z, KK, k0, K, indptr, idx, val, left, out); \
    break;
    switch (w) {
      JAXCLP_W(1) JAXCLP_W(2) JAXCLP_W(3) JAXCLP_W(4) JAXCLP_W(5) JAXCLP_W(6) JAXCLP_W(7) JAXCLP_W(8)
      JAXCLP_W(9) JAXCLP_W(10) JAXCLP_W(11) JAXCLP_W(12) JAXCLP_W(13) JAXCLP_W(14) JAXCLP_W(15) JAXCLP_W(16)
      default: break;
    }
#undef JAXCLP_W
  }
}

// Rows [r0, r1) for K <= kBlock: z is (cols, K) row-major.
template <typename T, bool kScaled>
void rows_small(int64_t r0, int64_t r1, const int32_t* indptr, const int32_t* idx, const T* val, const T* z,
                const T* left, T* out, int64_t K) {
#define JAXCLP_CASE(KK) \
  case KK:              \
    return rows_cols<T, KK, kScaled, false>(r0, r1, z, KK, 0, KK, indptr, idx, val, left, out);
  switch (K) {
    JAXCLP_CASE(1) JAXCLP_CASE(2) JAXCLP_CASE(3) JAXCLP_CASE(4) JAXCLP_CASE(5) JAXCLP_CASE(6) JAXCLP_CASE(7)
    JAXCLP_CASE(8) JAXCLP_CASE(9) JAXCLP_CASE(10) JAXCLP_CASE(11) JAXCLP_CASE(12) JAXCLP_CASE(13)
    JAXCLP_CASE(14) JAXCLP_CASE(15) JAXCLP_CASE(16)
    default: return;
  }
#undef JAXCLP_CASE
}

// Shared state of one parallel call; helpers hold it by shared_ptr so a late helper never sees freed state.
struct Job {
  std::vector<int64_t> bounds;  // chunk c covers rows [bounds[c], bounds[c + 1])
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
  std::function<void(int64_t, int64_t)> body;

  void work() {
    const int64_t n = static_cast<int64_t>(bounds.size()) - 1;
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= n) return;
      body(bounds[c], bounds[c + 1]);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};

// Splits rows into `chunks` pieces of about equal cost indptr[r] + r (nonzeros plus per-row overhead).
std::vector<int64_t> balanced_bounds(const int32_t* indptr, int64_t rows, int64_t chunks) {
  std::vector<int64_t> b(chunks + 1);
  const int64_t total = static_cast<int64_t>(indptr[rows]) + rows;
  b[0] = 0;
  int64_t lo = 0;
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t target = total * c / chunks;
    int64_t hi = rows;  // first r in [lo, rows] with cost(r) >= target
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<int64_t>(indptr[mid]) + mid < target) lo = mid + 1; else hi = mid;
    }
    b[c] = lo;
  }
  b[chunks] = rows;
  return b;
}

constexpr int64_t kSerialWork = 1 << 15;  // below this many (nonzeros + rows) * K, run on the caller only

// Runs body(r0, r1) over the chunks `bounds` on the caller plus up to `threads` pool tasks.
void parallel_for(ffi::ThreadPool& pool, int64_t threads, std::vector<int64_t> bounds,
                  std::function<void(int64_t, int64_t)> body) {
  const int64_t n = static_cast<int64_t>(bounds.size()) - 1;
  if (n <= 0) return;
  if (n == 1 || threads <= 1) {
    for (int64_t c = 0; c < n; ++c) body(bounds[c], bounds[c + 1]);
    return;
  }
  auto job = std::make_shared<Job>();
  job->bounds = std::move(bounds);
  job->body = std::move(body);
  const int64_t helpers = std::min<int64_t>(threads, n - 1);
  for (int64_t t = 0; t < helpers; ++t) pool.Schedule([job] { job->work(); });
  job->work();
  if (job->done.load(std::memory_order_acquire) != n) {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->done.load(std::memory_order_acquire) == n; });
  }
}

std::vector<int64_t> even_bounds(int64_t rows, int64_t chunks) {
  std::vector<int64_t> b(chunks + 1);
  for (int64_t c = 0; c <= chunks; ++c) b[c] = rows * c / chunks;
  return b;
}

// Scratch for right * y: kept per calling thread (calls are synchronous) up to kKeepScratch bytes.
constexpr size_t kKeepScratch = size_t(64) << 20;

template <typename T, bool kScaled>
ffi::Error run(ffi::ThreadPool& pool, const ffi::AnyBuffer& values, const ffi::AnyBuffer& indices,
               const ffi::AnyBuffer& indptr_b, const ffi::AnyBuffer& y, const T* left, const T* right,
               ffi::Result<ffi::AnyBuffer>& out) {
  const auto yd = y.dimensions();
  const auto od = out->dimensions();
  if (yd.size() != 2 || od.size() != 2 || yd[1] != od[1])
    return ffi::Error::InvalidArgument("jaxclp csr kernel: y and out must be 2-D with the same columns");
  const int64_t rows = static_cast<int64_t>(indptr_b.element_count()) - 1;
  const int64_t cols = yd[0];
  const int64_t K = yd[1];
  if (rows != od[0]) return ffi::Error::InvalidArgument("jaxclp csr kernel: indptr has rows + 1 entries");
  if (values.element_count() != indices.element_count())
    return ffi::Error::InvalidArgument("jaxclp csr kernel: values and indices differ in length");
  const int32_t* indptr = static_cast<const int32_t*>(indptr_b.untyped_data());
  const int32_t* idx = static_cast<const int32_t*>(indices.untyped_data());
  const T* val = static_cast<const T*>(values.untyped_data());
  const T* yp = static_cast<const T*>(y.untyped_data());
  T* op = static_cast<T*>(out->untyped_data());
  if (rows <= 0 || K <= 0) return ffi::Error::Success();

  const int64_t nnz = indptr[rows];
  const int64_t work = (nnz + rows) * K;
  int64_t threads = pool.num_threads();
  if (threads < 1 || work < kSerialWork) threads = 1;
  const int64_t chunks = threads == 1 ? 1 : std::min<int64_t>(rows, 4 * (threads + 1));

  // The gathered operand z: y itself (plain, K <= kBlock), right * y, and/or the column-blocked copy.
  const bool blocked = K > kBlock;
  const T* z = yp;
  static thread_local std::vector<T> kept;
  std::vector<T> local;
  if (kScaled || blocked) {
    const size_t count = static_cast<size_t>(cols * K);
    // + 64 bytes: the blocks start on a cache line, so a 16-float block row is exactly one line
    const size_t pad = 64 / sizeof(T);
    std::vector<T>* buf = count * sizeof(T) <= kKeepScratch ? &kept : &local;
    if (buf->size() < count + pad) buf->resize(count + pad);
    T* zb = buf->data();
    zb += (64 - reinterpret_cast<uintptr_t>(zb) % 64) % 64 / sizeof(T);
    const int64_t zchunks = threads == 1 ? 1 : std::min<int64_t>(std::max<int64_t>(cols, 1), 2 * threads);
    parallel_for(pool, threads, even_bounds(cols, zchunks), [=](int64_t a, int64_t b) {
      if (!blocked) {
        for (int64_t i = a * K; i < b * K; ++i) zb[i] = right[i] * yp[i];
        return;
      }
      for (int64_t k0 = 0; k0 < K; k0 += kBlock) {
        const int64_t w = std::min<int64_t>(kBlock, K - k0);
        T* dst = zb + cols * k0;
        for (int64_t i = a; i < b; ++i)
          for (int64_t k = 0; k < w; ++k)
            dst[i * w + k] = kScaled ? right[i * K + k0 + k] * yp[i * K + k0 + k] : yp[i * K + k0 + k];
      }
    });
    z = zb;
  }
  parallel_for(pool, threads, balanced_bounds(indptr, rows, chunks), [=](int64_t r0, int64_t r1) {
    if (blocked)
      rows_blocked<T, kScaled>(r0, r1, cols, K, indptr, idx, val, z, left, op);
    else
      rows_small<T, kScaled>(r0, r1, indptr, idx, val, z, left, op, K);
  });
  return ffi::Error::Success();
}

bool same_float(ffi::DataType t, const ffi::AnyBuffer& b) { return b.element_type() == t; }

ffi::Error CsrMmImpl(ffi::ThreadPool pool, ffi::AnyBuffer values, ffi::AnyBuffer indices, ffi::AnyBuffer indptr,
                     ffi::AnyBuffer y, ffi::Result<ffi::AnyBuffer> out) {
  const auto t = y.element_type();
  if (!same_float(t, values) || !same_float(t, *out))
    return ffi::Error::InvalidArgument("jaxclp csr_mm: values, y and out must share one float dtype");
  if (t == ffi::DataType::F32)
    return run<float, false>(pool, values, indices, indptr, y, nullptr, nullptr, out);
  if (t == ffi::DataType::F64)
    return run<double, false>(pool, values, indices, indptr, y, nullptr, nullptr, out);
  return ffi::Error::InvalidArgument("jaxclp csr_mm: only float32 and float64 are supported");
}

ffi::Error CsrMmScaledImpl(ffi::ThreadPool pool, ffi::AnyBuffer values, ffi::AnyBuffer indices,
                           ffi::AnyBuffer indptr, ffi::AnyBuffer y, ffi::AnyBuffer left, ffi::AnyBuffer right,
                           ffi::Result<ffi::AnyBuffer> out) {
  const auto t = y.element_type();
  if (!same_float(t, values) || !same_float(t, *out) || !same_float(t, left) || !same_float(t, right))
    return ffi::Error::InvalidArgument("jaxclp csr_mm_scaled: all float operands must share one dtype");
  if (left.element_count() != out->element_count() || right.element_count() != y.element_count())
    return ffi::Error::InvalidArgument("jaxclp csr_mm_scaled: left must match out and right must match y");
  if (t == ffi::DataType::F32)
    return run<float, true>(pool, values, indices, indptr, y, static_cast<const float*>(left.untyped_data()),
                            static_cast<const float*>(right.untyped_data()), out);
  if (t == ffi::DataType::F64)
    return run<double, true>(pool, values, indices, indptr, y, static_cast<const double*>(left.untyped_data()),
                             static_cast<const double*>(right.untyped_data()), out);
  return ffi::Error::InvalidArgument("jaxclp csr_mm_scaled: only float32 and float64 are supported");
}

// out[e] = g[r] . y[idx[e]] for the nonzeros e of rows [r0, r1); g's row stays in registers for its row.
template <typename T, int KB>
void sddmm_rows(int64_t r0, int64_t r1, const int32_t* __restrict indptr, const int32_t* __restrict idx,
                const T* __restrict g, const T* __restrict y, T* __restrict out) {
  for (int64_t r = r0; r < r1; ++r) {
    T gr[KB];
    for (int k = 0; k < KB; ++k) gr[k] = g[r * KB + k];
    for (int32_t e = indptr[r]; e < indptr[r + 1]; ++e) {
      const T* __restrict ys = y + static_cast<int64_t>(idx[e]) * KB;
      T acc = T(0);
      for (int k = 0; k < KB; ++k) acc += gr[k] * ys[k];
      out[e] = acc;
    }
  }
}

template <typename T>
void sddmm_rows_any(int64_t r0, int64_t r1, const int32_t* indptr, const int32_t* idx, const T* g, const T* y,
                    T* out, int64_t K) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * K;
    for (int32_t e = indptr[r]; e < indptr[r + 1]; ++e) {
      const T* ys = y + static_cast<int64_t>(idx[e]) * K;
      T acc = T(0);
      for (int64_t k = 0; k < K; ++k) acc += gr[k] * ys[k];
      out[e] = acc;
    }
  }
}

template <typename T>
ffi::Error run_sddmm(ffi::ThreadPool& pool, const ffi::AnyBuffer& indices, const ffi::AnyBuffer& indptr_b,
                     const ffi::AnyBuffer& g, const ffi::AnyBuffer& y, ffi::Result<ffi::AnyBuffer>& out) {
  const auto gd = g.dimensions();
  const auto yd = y.dimensions();
  if (gd.size() != 2 || yd.size() != 2 || gd[1] != yd[1])
    return ffi::Error::InvalidArgument("jaxclp csr_sddmm: g and y must be 2-D with the same columns");
  const int64_t rows = static_cast<int64_t>(indptr_b.element_count()) - 1;
  if (rows != gd[0]) return ffi::Error::InvalidArgument("jaxclp csr_sddmm: indptr has rows(g) + 1 entries");
  if (out->element_count() != indices.element_count())
    return ffi::Error::InvalidArgument("jaxclp csr_sddmm: out and indices differ in length");
  const int32_t* indptr = static_cast<const int32_t*>(indptr_b.untyped_data());
  const int32_t* idx = static_cast<const int32_t*>(indices.untyped_data());
  const T* gp = static_cast<const T*>(g.untyped_data());
  const T* yp = static_cast<const T*>(y.untyped_data());
  T* op = static_cast<T*>(out->untyped_data());
  const int64_t K = gd[1];
  if (rows <= 0) return ffi::Error::Success();
  if (K <= 0) {
    std::fill(op, op + out->element_count(), T(0));
    return ffi::Error::Success();
  }
  const int64_t work = (static_cast<int64_t>(indptr[rows]) + rows) * K;
  int64_t threads = pool.num_threads();
  if (threads < 1 || work < kSerialWork) threads = 1;
  const int64_t chunks = threads == 1 ? 1 : std::min<int64_t>(rows, 4 * (threads + 1));
  parallel_for(pool, threads, balanced_bounds(indptr, rows, chunks), [=](int64_t r0, int64_t r1) {
#define JAXCLP_SD(KK) \
  case KK:            \
    return sddmm_rows<T, KK>(r0, r1, indptr, idx, gp, yp, op);
    switch (K) {
      JAXCLP_SD(1) JAXCLP_SD(2) JAXCLP_SD(3) JAXCLP_SD(4) JAXCLP_SD(8) JAXCLP_SD(16) JAXCLP_SD(17)
      JAXCLP_SD(32) JAXCLP_SD(64)
      default: return sddmm_rows_any<T>(r0, r1, indptr, idx, gp, yp, op, K);
    }
#undef JAXCLP_SD
  });
  return ffi::Error::Success();
}

ffi::Error CsrSddmmImpl(ffi::ThreadPool pool, ffi::AnyBuffer indices, ffi::AnyBuffer indptr, ffi::AnyBuffer g,
                        ffi::AnyBuffer y, ffi::Result<ffi::AnyBuffer> out) {
  const auto t = g.element_type();
  if (!same_float(t, y) || !same_float(t, *out))
    return ffi::Error::InvalidArgument("jaxclp csr_sddmm: g, y and out must share one float dtype");
  if (t == ffi::DataType::F32) return run_sddmm<float>(pool, indices, indptr, g, y, out);
  if (t == ffi::DataType::F64) return run_sddmm<double>(pool, indices, indptr, g, y, out);
  return ffi::Error::InvalidArgument("jaxclp csr_sddmm: only float32 and float64 are supported");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxclpCsrSddmm, CsrSddmmImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()  // indices
                                  .Arg<ffi::AnyBuffer>()  // indptr
                                  .Arg<ffi::AnyBuffer>()  // g
                                  .Arg<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxclpCsrMm, CsrMmImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()  // values
                                  .Arg<ffi::AnyBuffer>()  // indices
                                  .Arg<ffi::AnyBuffer>()  // indptr
                                  .Arg<ffi::AnyBuffer>()  // y
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxclpCsrMmScaled, CsrMmScaledImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()  // values
                                  .Arg<ffi::AnyBuffer>()  // indices
                                  .Arg<ffi::AnyBuffer>()  // indptr
                                  .Arg<ffi::AnyBuffer>()  // y
                                  .Arg<ffi::AnyBuffer>()  // left
                                  .Arg<ffi::AnyBuffer>()  // right
                                  .Ret<ffi::AnyBuffer>());

// ------------------------------------------------------------------------------------------ Python module

static PyObject* registrations(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  struct Entry { const char* name; void* fn; };
  const Entry entries[] = {{"jaxclp_csr_mm", reinterpret_cast<void*>(JaxclpCsrMm)},
                           {"jaxclp_csr_mm_scaled", reinterpret_cast<void*>(JaxclpCsrMmScaled)},
                           {"jaxclp_csr_sddmm", reinterpret_cast<void*>(JaxclpCsrSddmm)}};
  for (const Entry& e : entries) {
    PyObject* cap = PyCapsule_New(e.fn, nullptr, nullptr);
    if (cap == nullptr || PyDict_SetItemString(d, e.name, cap) != 0) {
      Py_XDECREF(cap);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(cap);
  }
  return d;
}

static PyMethodDef kMethods[] = {
    {"registrations", registrations, METH_NOARGS, "FFI handler capsules by target name."},
    {nullptr, nullptr, 0, nullptr}};

static struct PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_kernels",
                                     "jaxclp fused CSR kernels (XLA FFI, CPU).", -1, kMethods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&kModule); }
