#pragma once
// The Autograd key's boxed fallback (fallback.cpp), which engine.cpp registers: that object is
// always linked, where a static initializer in fallback.cpp alone would be dropped with its object
// from the static library.

#include "kael/dispatch/dispatcher.h"

namespace kael::autograd {

// Runs an op that has no Autograd kernel below autograd; raises if an input requires grad and the
// op made a floating-point result (which would silently have no history).
void autograd_fallback(const dispatch::OpEntry& op, DispatchKeySet ks, dispatch::Stack& stack);

}  // namespace kael::autograd
