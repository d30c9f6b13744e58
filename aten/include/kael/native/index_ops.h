#pragma once
// Helpers shared by the indexing kernels (aten/src/native/cpu/index_ops.cpp and its siblings)
// and the shape and lookup ops built on them.
//
// Note [Index checks come first]
// Every op that reads indices from a tensor (index_select, gather, scatter, index_add_, ...)
// walks the index tensor once before anything is written and raises IndexError
// "<op>: index <i> is out of bounds for dimension <d> with size <n>" at the first bad one. PyTorch
// raises RuntimeError (or IndexError) from inside its loop, which may have written part of an
// in-place result by then; kael's in-place ops leave self untouched when they raise.

#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "kael/core/tensor.h"

namespace kael::native {

// Raises IndexError naming `op` unless every element of `index` (an int32 or int64 tensor) lies
// in [0, size), or in [-size, size) when `allow_negative`. IndexError is torch's class for
// index_select, index_add, index_copy, index_fill and indexing; check_gather_index_range raises
// RuntimeError, torch's class for gather, scatter and scatter_reduce.
void check_index_range(const char* op, const Tensor& index, std::int64_t size, std::int64_t dim,
                       bool allow_negative = false);
void check_gather_index_range(const char* op, const Tensor& index, std::int64_t size, std::int64_t dim);

// A new tensor of self's shape and dtype in self's memory order (PyTorch's preserve_format).
Tensor alloc_like_cpu(const Tensor& self);

// The dims a 0-d tensor has for the indexing ops: 1 (PyTorch treats it as a 1-d tensor of one
// element there).
inline std::int64_t dims_as_vector(const Tensor& t) { return t.dim() == 0 ? 1 : t.dim(); }
inline std::int64_t size_as_vector(const Tensor& t, std::int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }

// The kernels of the list ops (cat, stack, split, chunk, einsum) and of unique, over plain
// C++ types; the registry's kernels call them.
Tensor cat_impl(std::span<const Tensor> tensors, std::int64_t dim);
Tensor stack_impl(std::span<const Tensor> tensors, std::int64_t dim);
std::vector<Tensor> split_impl(const Tensor& self, std::int64_t split_size, std::int64_t dim);
std::vector<Tensor> split_with_sizes_impl(const Tensor& self, IntArrayRef split_sizes, std::int64_t dim);
std::vector<Tensor> chunk_impl(const Tensor& self, std::int64_t chunks, std::int64_t dim);
Tensor einsum_impl(std::string_view equation, std::span<const Tensor> operands);
std::tuple<Tensor, Tensor, Tensor> unique_cpu(const Tensor& self, bool sorted, bool return_inverse, bool return_counts);
std::tuple<Tensor, Tensor, Tensor> unique_dim_cpu(const Tensor& self, std::int64_t dim, bool sorted,
                                                  bool return_inverse, bool return_counts);

}  // namespace kael::native
