#pragma once
// The IDX format of the MNIST files: a reader from bytes in memory.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kael/core/tensor.h"

namespace kael::data {

// Note [IDX files]
// An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of dims),
// one big-endian uint32 per dim, then the elements in row-major order, big-endian. Type codes:
// 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64. read_idx checks
// the magic, the type code, the header length, that the product of the dims does not overflow
// and that the data is exactly as long as the header says (ValueError naming `name` and the
// offending values otherwise), then allocates and copies, converting to host byte order.
// gzip is not handled here: kael.data.load_mnist decompresses with Python's gzip first.
Tensor read_idx(const std::uint8_t* bytes, std::size_t size, std::string_view name);

}  // namespace kael::data
