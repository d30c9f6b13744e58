#pragma once
// The intra-op thread count shared by kael's loops and oneDNN (both run on OpenMP).
// The default comes from KAEL_NUM_THREADS, else the number of cores.

namespace kael {

// Raises ValueError outside 1..1024.
void set_num_threads(int n);
// Raises ValueError when KAEL_NUM_THREADS is set to something other than an integer in 1..1024.
int get_num_threads();

}  // namespace kael
