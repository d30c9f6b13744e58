// Test hooks of kael's thread pool (Note [Thread pool] in kael/runtime/threads.h):
//   _parallel_trace_start() / _parallel_trace_stop() -> {"regions", "threads", "max_region_threads"}:
//       which OS threads took part in the pool's regions in between (kernels' real loops);
//   _pool_workers() -> the pool's live worker threads;
//   _gemm_f32_available() -> whether float32 matmul runs on kael's GEMM (on the pool) rather than
//       on oneDNN (on OpenMP), Note [float32 GEMM] in native/cpu/gemm.cpp;
//   _parallel_for_test(n, grain, fail_at=(), /) -> the (begin, end) pieces parallel_for ran over
//       range(n), raising ValueError from inside the pieces that hold an element of fail_at;
//   _parallel_for_stall_test(n, grain, on_caller, timeout_s, /) -> (begin, end, on_calling_thread,
//       stalled) of each piece, where the first piece that runs on the calling thread (on_caller)
//       or on a worker waits (up to timeout_s) until every other piece has run: they must have
//       run on the other threads (Note [Pieces and stealing]).
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael/core/error.h"
#include "kael/native/gemm.h"
#include "kael/runtime/threads.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

PyObject* py_parallel_trace_start(PyObject*, PyObject*) {
  parallel_trace_start();
  Py_RETURN_NONE;
}

PyObject* py_parallel_trace_stop(PyObject*, PyObject*) {
  const ParallelTrace t = parallel_trace_stop();
  return Py_BuildValue("{s:L,s:L,s:L}", "regions", static_cast<long long>(t.regions), "threads",
                       static_cast<long long>(t.threads), "max_region_threads",
                       static_cast<long long>(t.max_region_threads));
}

PyObject* py_pool_workers(PyObject*, PyObject*) { return PyLong_FromLong(pool_workers()); }

PyObject* py_gemm_f32_available(PyObject*, PyObject*) { return PyBool_FromLong(native::gemm_f32_available()); }

PyObject* py_parallel_for_test(PyObject*, PyObject* args) {
  long long n = 0, grain = 0;
  PyObject* fail_obj = nullptr;
  if (!PyArg_ParseTuple(args, "LL|O:_parallel_for_test", &n, &grain, &fail_obj)) return nullptr;
  std::vector<std::int64_t> fail_at;
  if (fail_obj != nullptr) {
    PyObject* seq = PySequence_Fast(fail_obj, "_parallel_for_test: fail_at must be a sequence of ints");
    if (seq == nullptr) return nullptr;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
      if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(seq);
        return nullptr;
      }
      fail_at.push_back(v);
    }
    Py_DECREF(seq);
  }
  std::mutex mutex;
  std::vector<std::pair<std::int64_t, std::int64_t>> pieces;
  // the pieces run on the pool: no Python object is touched there
  PyObject* ran = guarded([&] {
    parallel_for(0, n, grain, [&](std::int64_t begin, std::int64_t end) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        pieces.emplace_back(begin, end);
      }
      for (std::int64_t f : fail_at)
        KAEL_CHECK_VALUE(f < begin || f >= end, "_parallel_for_test: element " << f << " failed in the piece ["
                                                                               << begin << ", " << end << ")");
    });
  }, gil::Released{});
  if (ran == nullptr) return nullptr;
  Py_DECREF(ran);
  std::sort(pieces.begin(), pieces.end());
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(pieces.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    PyObject* item = Py_BuildValue("(LL)", static_cast<long long>(pieces[i].first),
                                   static_cast<long long>(pieces[i].second));
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

PyObject* py_parallel_for_stall_test(PyObject*, PyObject* args) {
  long long n = 0, grain = 0;
  int on_caller = 0;
  double timeout_s = 0;
  if (!PyArg_ParseTuple(args, "LLpd:_parallel_for_stall_test", &n, &grain, &on_caller, &timeout_s)) return nullptr;
  if (!(timeout_s >= 0.0 && timeout_s <= 3600.0)) {  // NaN fails too
    PyErr_Format(PyExc_ValueError, "_parallel_for_stall_test: timeout_s must be in [0, 3600], got %R",
                 PyTuple_GET_ITEM(args, 3));
    return nullptr;
  }
  std::mutex mutex;
  std::vector<std::tuple<std::int64_t, std::int64_t, bool, bool>> pieces;
  std::atomic<std::int64_t> covered{0};  // elements of the pieces that have run, the stalled one aside
  std::atomic<bool> stalled{false};
  const std::thread::id caller = std::this_thread::get_id();
  // the pieces run on the pool: no Python object is touched there
  PyObject* ran = guarded([&] {
    parallel_for(0, n, grain, [&](std::int64_t begin, std::int64_t end) {
      const bool here = std::this_thread::get_id() == caller;
      const bool stall = here == (on_caller != 0) && !stalled.exchange(true);
      {
        std::lock_guard<std::mutex> lock(mutex);
        pieces.emplace_back(begin, end, here, stall);
      }
      if (!stall) {
        covered.fetch_add(end - begin);
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
      while (covered.load() < n - (end - begin) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }, gil::Released{});
  if (ran == nullptr) return nullptr;
  Py_DECREF(ran);
  std::sort(pieces.begin(), pieces.end());
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(pieces.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& [b, e, here, stall] = pieces[i];
    PyObject* item = Py_BuildValue("(LLOO)", static_cast<long long>(b), static_cast<long long>(e),
                                   here ? Py_True : Py_False, stall ? Py_True : Py_False);
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

}  // namespace

void append_parallel_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_parallel_trace_start", py_parallel_trace_start, METH_NOARGS,
                 "_parallel_trace_start()\n--\n\nStarts recording which threads take part in the thread pool's "
                 "parallel regions (tests)."});
  out.push_back({"_parallel_trace_stop", py_parallel_trace_stop, METH_NOARGS,
                 "_parallel_trace_stop()\n--\n\nStops recording; returns the number of regions that ran on the "
                 "pool, of distinct threads that took part in them, and the most threads one region used."});
  out.push_back({"_pool_workers", py_pool_workers, METH_NOARGS,
                 "_pool_workers()\n--\n\nThe thread pool's live worker threads."});
  out.push_back({"_gemm_f32_available", py_gemm_f32_available, METH_NOARGS,
                 "_gemm_f32_available()\n--\n\nWhether float32 matmul runs on kael's own GEMM (on the thread pool) "
                 "rather than on oneDNN (tests)."});
  out.push_back({"_parallel_for_test", py_parallel_for_test, METH_VARARGS,
                 "_parallel_for_test(n, grain, fail_at=(), /)\n--\n\nRuns parallel_for over range(n) with the "
                 "grain; returns the (begin, end) pieces it ran, or raises ValueError from the pieces holding an "
                 "element of fail_at (tests)."});
  out.push_back({"_parallel_for_stall_test", py_parallel_for_stall_test, METH_VARARGS,
                 "_parallel_for_stall_test(n, grain, on_caller, timeout_s, /)\n--\n\nRuns parallel_for over range(n) "
                 "with the grain, the first piece to run on the calling thread (on_caller) or on a worker waiting (up "
                 "to timeout_s) until every other piece has run; returns (begin, end, on_calling_thread, stalled) of "
                 "each piece (tests)."});
}

}  // namespace kael::python
