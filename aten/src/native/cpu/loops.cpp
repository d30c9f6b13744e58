// The loop engine's geometry code, compiled once per operand count (Note [One copy of the loops]
// in kael/native/loops.h).
#include "kael/native/loops.h"

namespace kael::native {

template <int N>
void run_rows(const LoopGeometry<N>& g, RowFn row, const void* context) {
  run_loop<N>(g, [row, context](char* const* ptrs, const std::int64_t* strides, std::int64_t n) {
    row(context, ptrs, strides, n);
  });
}

#define KAEL_LOOPS_INSTANTIATE(N)                                                                     \
  template LoopGeometry<N> make_geometry<N>(IntArrayRef, const std::array<OperandView, N>&, bool);   \
  template bool widen_repeating_inputs<N>(LoopGeometry<N>&, int, std::int64_t, std::vector<char>&); \
  template void run_rows<N>(const LoopGeometry<N>&, RowFn, const void*);
KAEL_LOOPS_INSTANTIATE(1)
KAEL_LOOPS_INSTANTIATE(2)
KAEL_LOOPS_INSTANTIATE(3)
KAEL_LOOPS_INSTANTIATE(4)
#undef KAEL_LOOPS_INSTANTIATE

}  // namespace kael::native
