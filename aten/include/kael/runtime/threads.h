#pragma once
// kael's intra-op parallelism: one thread count, kael's own thread pool for kael's loops, and the
// OpenMP setting oneDNN runs with. The default count comes from KAEL_NUM_THREADS, else OpenMP's
// default (OMP_NUM_THREADS, else the number of cores this process may run on).
//
// Note [Thread pool]
// kael's kernels parallelise with parallel_for(begin, end, grain, f), which runs f(b, e) over
// disjoint subranges covering [begin, end):
//   - a range of at most `grain` elements runs on the calling thread, without touching the pool
//     (one comparison: small tensors pay nothing); so do calls nested inside a parallel region
//     and calls made while another thread's region occupies the pool;
//   - otherwise min(threads, ceil(n / grain)) threads run it: the calling thread and workers
//     1, 2, ..., in pieces (Note [Pieces and stealing]). Workers are std::threads named
//     kael-pool, started on the first region that needs them and stopped when the count
//     shrinks; the calling thread waits for every worker it woke before parallel_for returns;
//   - an exception thrown by a piece does not terminate the process: the first one is kept,
//     pieces that have not started yet are skipped, and it is rethrown on the calling thread
//     once every thread is done.
// Workers run kernels' inner loops only: they never touch Python objects, never take the GIL
// and never call back into Python (Note [Concurrency] in kael/core/concurrency.h). What a piece
// computes must not depend on how many pieces there are where the result is to be
// deterministic (sums add fixed blocks in a fixed order: kael/native/cpu/reduce.cpp).
//
// Note [Pieces and stealing]
// A region's range is cut into ceil(n / grain) pieces, at most kPiecesPerThread (8) per thread,
// of equal size but the last, and each thread is dealt a run of neighbouring pieces: thread 0
// the first run, and so on, as the static chunks of a pool without pieces would be. A thread
// takes its own pieces in order from the front of its run; when its run is empty it steals
// pieces from the back of the other threads' runs, until none is left. On an idle machine each
// thread runs its own run, in order, as before; when one thread is slowed (a core shared with
// other work, a worker woken late) the others finish its pieces instead of waiting for it
// (docs/performance.md, "Thread pool"). Which thread runs a piece depends on timing, what the
// pieces are does not: a kernel whose result must not depend on the thread count cuts its own
// work at fixed offsets (Note [Deterministic sums]), which parallel_for's pieces then group. run_loop tells each piece the length of the
// row it belongs to, so that decisions made by size (streaming stores) are the row's.
//
// Note [Workers off the caller's CPU]
// In a virtual machine whose idle virtual CPUs the host takes back (KVM, most cloud machines),
// Linux counts an idle CPU whose host thread is not running as busy (vcpu_is_preempted), and a
// worker woken after a pause (tens of ms of Python, I/O, a sleep) may be queued on the CPU of
// the thread that woke it: the two halves of a region then run one after the other (seen on
// the KVM machine of docs/performance.md, "Thread pool"). So before waking its workers a region
// makes their CPU sets the calling thread's set less the CPU it runs on, when that set has CPUs
// enough for one thread each (else the calling thread's set): the scheduler then wakes
// each worker on another CPU, and the workers follow a caller bound to fewer CPUs. The sets
// change only when the caller's CPU or set does (one pthread_setaffinity_np per worker; a
// sched_getaffinity and a sched_getcpu per region otherwise); only kael's own workers are
// touched, never the caller.
//
// Note [Spinning before blocking]
// A thread blocked on a condition variable of a virtual machine whose idle CPU has halted takes
// tens to hundreds of microseconds to run again once woken, more than an operator on a 1 MB
// tensor takes, so such operators ran slower on 2 threads than on 1 there, a worker and the
// caller blocking once or more in each region (docs/performance.md, "Thread pool").
// So a worker done with a region waits for the next one by spinning (the pause instruction, the
// clock read every 64 turns) for up to kSpinBudget (200 us) before it blocks, and the calling
// thread done with its pieces waits for the workers the same way: regions issued back to back,
// as a training step issues them, find the workers running. Only while the workers are kept off
// the caller's CPU (Note [Workers off the caller's CPU]): a worker spinning on the CPU its
// caller needs would hold that CPU for the whole budget, so a caller bound to fewer CPUs than
// threads has its workers block at once, as before. A region is posted by an atomic store to
// the worker's slot; the worker's mutex, taken and released after the store, makes a worker
// that is about to block either see the region or be blocked when it is notified. The cost:
// after its last region a worker keeps a CPU busy for up to 200 us (GNU OpenMP's workers, by
// default, spin far longer).
//
// Note [Process-wide thread count]
// kael's count is one process-wide value: every thread, including threads created later, runs
// kael's loops with it. oneDNN runs on GNU OpenMP, which keeps its count per OS thread
// (omp_set_num_threads changes only the caller's, and threads created later start from OpenMP's
// default): set_num_threads applies it to the calling thread, and code that calls oneDNN first
// calls sync_openmp_threads(), which applies it to the calling thread when that thread has not
// seen the current value yet.
//
// Note [Threads after fork]
// A child forked from a process whose threads ran keeps kael's count and its parallel loops: the
// pool's threads do not exist in the child, so a pthread_atfork child handler drops the parent's
// pool (without touching its threads or locks) and the child starts new workers on its first
// parallel region. The prepare handler holds the pool's lock across fork(), so no region is half
// way through when the child's copy of memory is made. GNU OpenMP cannot restart its threads in
// such a child (its first parallel region would wait forever for threads that no longer exist),
// so oneDNN runs on one thread in a forked child (openmp_threads() is 1 there); kael's own loops
// run on the pool with the full count.

#include <cstdint>

namespace kael {

// Raises ValueError outside 1..1024.
void set_num_threads(int n);
// Raises ValueError when KAEL_NUM_THREADS is set to something other than an integer in 1..1024
// (and set_num_threads has not been called).
int get_num_threads();

// The process-wide count for a parallel region (never raises: an invalid KAEL_NUM_THREADS,
// which get_num_threads reports, counts as unset here).
int intra_op_threads() noexcept;
// The count oneDNN (OpenMP) runs with: intra_op_threads(), or 1 in a forked child (Note
// [Threads after fork]).
int openmp_threads() noexcept;
// Applies openmp_threads() to the calling thread's OpenMP setting if it differs from the value
// last applied there.
void sync_openmp_threads() noexcept;

// Whether the calling thread is running a piece of a parallel region (a pool worker, or the
// thread that started the region while it runs its pieces).
bool in_parallel_region() noexcept;

namespace detail {
using ChunkFn = void (*)(const void* context, std::int64_t begin, std::int64_t end);
// The pool's side of parallel_for, for ranges longer than grain.
void parallel_run(std::int64_t begin, std::int64_t end, std::int64_t grain, ChunkFn fn, const void* context);
}  // namespace detail

// Runs f(b, e) over subranges covering [begin, end) (Note [Thread pool]); f must be callable
// concurrently on disjoint subranges. Exceptions from f reach the caller.
template <typename F>
inline void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const F& f) {
  if (begin >= end) return;
  if (end - begin <= grain) {
    f(begin, end);
    return;
  }
  detail::parallel_run(
      begin, end, grain,
      [](const void* context, std::int64_t b, std::int64_t e) { (*static_cast<const F*>(context))(b, e); }, &f);
}

// For tests (kael._C._parallel_trace): while enabled, every pool region records the OS thread ids
// that took part in it (a thread that found no piece left counts too).
struct ParallelTrace {
  std::int64_t regions = 0;             // regions that ran on the pool
  std::int64_t threads = 0;             // distinct OS threads that took part in one of them
  std::int64_t max_region_threads = 0;  // the most distinct threads that took part in one region
};
void parallel_trace_start();
ParallelTrace parallel_trace_stop();
// Live worker threads of the pool (the threads a region adds to the calling one).
int pool_workers() noexcept;

}  // namespace kael
