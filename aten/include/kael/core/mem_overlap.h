#pragma once
// Memory overlap between what an op writes and what it reads.
//
// Note [Memory overlap]
// A write through a view can clobber elements that the same op still has to read. PyTorch
// classifies the two hazards and kael follows its rules exactly where it raises:
// - internal overlap of the written tensor: Yes when a dim of size > 1 has stride 0 (an
//   expanded tensor), No when the tensor is non-overlapping and dense, TooHard otherwise.
//   Writes raise on Yes.
// - overlap of the written tensor with an input: Full (the same elements in the same
//   layout: reading and writing element i touch the same memory only at i, so elementwise
//   ops are safe), Partial (both non-overlapping and dense, and their byte ranges intersect
//   without being Full), No (provably disjoint), TooHard (a non-dense operand whose bytes
//   may meet the other's). Writes raise on Partial.
// Where PyTorch gets TooHard it goes ahead, and its result then depends on the order in which
// its loops visit elements. kael instead reads such an input from a snapshot taken before the
// first write (see snapshot_if_overlapping), so the result is the one of an op that reads all
// of its inputs before writing: never a silently clobbered value.
// Addresses are compared, not storages, so views of memory shared by two storages count too.

#include "kael/core/tensor.h"

namespace kael {

enum class MemOverlap : std::uint8_t { No, Yes, TooHard };
enum class MemOverlapStatus : std::uint8_t { No, Full, Partial, TooHard };

// Whether the elements of t cover its byte range exactly once in some order of dims
// (PyTorch's is_non_overlapping_and_dense).
bool is_non_overlapping_and_dense(const Tensor& t);

MemOverlap has_internal_overlap(const Tensor& t);
MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b);

// Whether some element of a and some element of b may share a byte. False only when they are
// provably disjoint (byte ranges apart, or interleaved so that no element can meet another).
bool may_share_memory(const Tensor& a, const Tensor& b);

// Raise kael::Error "<op>: unsupported operation: ..." with PyTorch's wording:
// on internal overlap Yes;
void assert_no_internal_overlap(const char* op, const Tensor& t);
// on Partial overlap between the written tensor and an input;
void assert_no_partial_overlap(const char* op, const Tensor& written, const Tensor& input);
// on Full or Partial overlap (for ops whose output must not alias an input at all).
void assert_no_overlap(const char* op, const Tensor& written, const Tensor& input);

}  // namespace kael
