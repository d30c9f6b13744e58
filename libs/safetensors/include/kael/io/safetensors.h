#pragma once
// safetensors files: reading, memory-mapping and writing tensors in the format of the
// `safetensors` package.
//
// Note [safetensors format]
// A file is: 8 bytes, the little-endian length N of the header; N bytes of header, a UTF-8
// JSON object; the data section. The header maps each tensor name to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (offsets are byte offsets into the data section) and may hold "__metadata__", an object of
// string values. The tensors' byte ranges, sorted, cover the data section exactly, without
// gaps or overlaps; each range holds product(shape) * itemsize bytes, C order, little endian.
// kael writes files byte for byte as the reference writer does: tensors sorted by dtype
// (descending in the reference's dtype order, which keeps every tensor aligned) then by name,
// offsets packed from 0, compact JSON with serde_json's escapes, "__metadata__" first, and
// the header padded with spaces to a multiple of 8 bytes.
//
// Note [safetensors parsing]
// The header is untrusted input. It is parsed by a small strict parser of our own
// (safetensors_header.cpp) that knows the schema: no recursion, no allocation larger than a
// constant times the header's length (which is checked against the file's size and the
// 100 MB limit before anything is read), every integer checked for overflow. Every problem is
// a ValueError "<op>: '<file>': [tensor '<name>': ]<reason>". Unknown keys in a tensor's
// entry, duplicate names, leading zeros, non-integer or negative numbers, invalid UTF-8 and
// lone surrogates are all rejected (stricter than the reference, which never writes them).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/scalar_type.h"
#include "kael/core/tensor.h"

namespace kael::io {

// A file-system failure (open, read, write, map): Python's OSError with the errno.
class FileError : public Error {
 public:
  FileError(int error_number, std::string path, const std::string& message)
      : Error(message), error_number_(error_number), path_(std::move(path)) {}
  int error_number() const noexcept { return error_number_; }
  const std::string& path() const noexcept { return path_; }

 private:
  int error_number_;
  std::string path_;
};

// A dtype of the safetensors format. `kael` is empty for those kael has no dtype for.
struct SafetensorsDtype {
  const char* name;
  int bits;  // per element (F4: 4, F6_*: 6)
  std::optional<ScalarType> kael;
};
// The dtype named `name` in a header, or nullptr when the format has no such dtype.
const SafetensorsDtype* find_safetensors_dtype(std::string_view name);
// The safetensors name of a kael dtype ("F32", "BOOL", ...).
const char* safetensors_dtype_name(ScalarType t);

struct SafetensorsTensorInfo {
  std::string name;
  const SafetensorsDtype* dtype = nullptr;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data section
};

struct SafetensorsHeader {
  std::optional<std::vector<std::pair<std::string, std::string>>> metadata;  // in file order
  std::vector<SafetensorsTensorInfo> tensors;                               // by data offset
};

inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

// Parses and validates a header (the N bytes after the length) of a file whose data section
// holds `data_size` bytes. Raises ValueError naming `op`, `file` and the tensor.
SafetensorsHeader parse_safetensors_header(std::string_view text, std::uint64_t data_size, const char* op,
                                           std::string_view file);

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StringPairs = std::vector<std::pair<std::string, std::string>>;

// The header (padded to 8 bytes) the reference writer writes for these tensors, and the order
// their data follows it in (indices into `tensors`).
std::string serialize_safetensors_header(const NamedTensors& tensors, const StringPairs* metadata,
                                         std::vector<std::size_t>* order);

// Writes `tensors` (CPU, any layout: non-contiguous ones are written in C order) to `path`
// through a temporary file in the same directory renamed over `path`, so a reader or a
// mapping of the old file never sees it change. Drops the caller's lock around the writes
// when the call allows it (Note [Concurrency]).
void save_safetensors(const NamedTensors& tensors, const std::string& path, const StringPairs* metadata);

// Reads every tensor of the file, in the order of their names. mmap=false: one read per
// tensor into memory of the caching allocator. mmap=true: the file is mapped privately
// (copy-on-write) and the tensors share the mapping, which lives until the last of them dies;
// writes to them never reach the file (Note [safetensors mmap] in safetensors.cpp).
NamedTensors load_safetensors(const std::string& path, bool mmap);

// The header's "__metadata__" (empty when the file has none); the whole header is validated.
StringPairs read_safetensors_metadata(const std::string& path);

namespace detail {
// s as a quoted literal for messages: printable ASCII as is, other bytes as \xNN, at most
// `limit` bytes shown.
std::string quoted(std::string_view s, std::size_t limit = 120);
}  // namespace detail

}  // namespace kael::io
