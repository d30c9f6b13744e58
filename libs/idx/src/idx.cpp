#include "kael/data/idx.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "kael/core/error.h"
#include "kael/ops/empty.h"

namespace kael::data {

namespace {

struct IdxType {
  ScalarType dtype;
  std::size_t itemsize;
};

bool idx_type(std::uint8_t code, IdxType& out) {
  switch (code) {
    case 0x08: out = {ScalarType::UInt8, 1}; return true;
    case 0x09: out = {ScalarType::Int8, 1}; return true;
    case 0x0B: out = {ScalarType::Int16, 2}; return true;
    case 0x0C: out = {ScalarType::Int32, 4}; return true;
    case 0x0D: out = {ScalarType::Float32, 4}; return true;
    case 0x0E: out = {ScalarType::Float64, 8}; return true;
    default: return false;
  }
}

std::string shape_str(const DimVector& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string hex(std::uint8_t b) {
  static const char digits[] = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 0xF];
}

}  // namespace

Tensor read_idx(const std::uint8_t* bytes, std::size_t size, std::string_view name) {
  KAEL_CHECK_VALUE(size >= 4, "read_idx: " << name << ": truncated IDX file: " << size
                                           << " bytes, shorter than the 4-byte magic number");
  KAEL_CHECK_VALUE(bytes[0] == 0 && bytes[1] == 0,
                   "read_idx: " << name << ": not an IDX file: the magic number starts with " << hex(bytes[0]) << " "
                                << hex(bytes[1]) << ", expected 0x00 0x00");
  IdxType type{};
  KAEL_CHECK_VALUE(idx_type(bytes[2], type), "read_idx: " << name << ": unknown IDX type code " << hex(bytes[2])
                                                          << " (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e)");
  const std::size_t ndim = bytes[3];
  KAEL_CHECK_VALUE(ndim <= static_cast<std::size_t>(kMaxDims),
                   "read_idx: " << name << ": " << ndim << " dims, at most " << kMaxDims << " are supported");
  const std::size_t header = 4 + 4 * ndim;
  KAEL_CHECK_VALUE(size >= header, "read_idx: " << name << ": truncated IDX header: " << ndim << " dims need "
                                                << header << " bytes, the file has " << size);
  DimVector shape;
  std::size_t count = 1;
  for (std::size_t d = 0; d < ndim; ++d) {
    const std::uint8_t* p = bytes + 4 + 4 * d;
    const std::uint32_t dim = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                              (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
    KAEL_CHECK_VALUE(dim == 0 || count <= std::numeric_limits<std::size_t>::max() / type.itemsize / dim,
                     "read_idx: " << name << ": the dims of the header overflow the element count");
    count *= dim;
    shape.push_back(static_cast<std::int64_t>(dim));
  }
  const std::size_t expected = count * type.itemsize;
  KAEL_CHECK_VALUE(size - header >= expected, "read_idx: " << name << ": truncated IDX data: the header's shape "
                                                           << shape_str(shape) << " needs " << expected << " bytes, the file has "
                                                           << size - header);
  KAEL_CHECK_VALUE(size - header == expected, "read_idx: " << name << ": " << size - header - expected
                                                           << " unexpected bytes after the IDX data of shape "
                                                           << shape_str(shape));
  Tensor out = kael::empty(shape, type.dtype, kCPU);
  if (count == 0) return out;
  auto* dst = static_cast<std::uint8_t*>(out.data_ptr());
  const std::uint8_t* src = bytes + header;
  if (type.itemsize == 1 || std::endian::native == std::endian::big) {
    std::memcpy(dst, src, expected);
  } else {
    // Big-endian to host order.
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t b = 0; b < type.itemsize; ++b)
        dst[i * type.itemsize + b] = src[i * type.itemsize + (type.itemsize - 1 - b)];
  }
  return out;
}

}  // namespace kael::data
