#pragma once
// What the reductions over dims share (reduce_ops.cpp, extremes.cpp, logsumexp.cpp): the run of a
// set-up reduction, the visit of its floating dtypes, the NaN-propagating comparison.
#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/native/reduce.h"
#include "reduce_engine.h"

namespace kael::native {

// The larger (Max) or smaller of two values, NaN winning: NaN propagates as in PyTorch.
template <bool Max, typename C>
bool replaces(C candidate, C current) {
  // `|`, not `||`: no branch, so the row loops vectorise
  return (Max ? candidate > current : candidate < current) | is_nan(candidate);
}

// independent accumulators, so the compiler vectorises the row loops
inline constexpr int kLanes = 8;

// Runs the loop of a set-up reduction on the call's own input (Note [Concurrency] in
// kael/core/concurrency.h); the outputs are new, no other thread sees them yet.
template <typename F>
void run_reduction(ReduceSetup& s, F&& loop) {
  UnlockedSection section;
  if (section.active()) s.input = section.own(s.input);
  section.unlock();
  const RowPlan plan = make_row_plan(s.input, s.dims.reduced);
  // no outputs (x of shape (7, 0, 3) reduced over dim 0): nothing to write, and the loops' walks
  // (which divide by the output's sizes) must not run
  if (plan.outputs == 0) return;
  loop(s.input, plan);
}

// Visits the floating dtypes only (the others are refused before).
template <typename F>
void visit_floating(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float32:
      return f(TypeTag<float>{});
    case ScalarType::Float64:
      return f(TypeTag<double>{});
    case ScalarType::Float16:
      return f(TypeTag<Half>{});
    case ScalarType::BFloat16:
      return f(TypeTag<BFloat16>{});
    default:
      KAEL_INTERNAL_ASSERT(false);
  }
}

}  // namespace kael::native
