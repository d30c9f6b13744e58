#pragma once
// The intra-op thread count shared by kael's loops and oneDNN (both run on OpenMP).
// The default comes from KAEL_NUM_THREADS, else the number of cores.
//
// Note [Process-wide thread count]
// OpenMP keeps its thread count per OS thread: omp_set_num_threads changes only the calling
// thread, and every thread created later starts from OpenMP's default. kael's setting is one
// process-wide value instead: kael's parallel loops pass it to each parallel region, and code
// that lets OpenMP pick the count itself (oneDNN) first calls sync_openmp_threads(), which
// applies it to the calling thread when that thread has not seen the current value yet.

namespace kael {

// Raises ValueError outside 1..1024.
void set_num_threads(int n);
// Raises ValueError when KAEL_NUM_THREADS is set to something other than an integer in 1..1024
// (and set_num_threads has not been called).
int get_num_threads();

// The process-wide count for a parallel region (never raises: an invalid KAEL_NUM_THREADS,
// which get_num_threads reports, counts as unset here).
int intra_op_threads() noexcept;
// Applies intra_op_threads() to the calling thread's OpenMP setting if it differs from the
// value last applied there.
void sync_openmp_threads() noexcept;

}  // namespace kael
