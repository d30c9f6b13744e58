// safetensors files: load (read or map), save, metadata. The header is parsed in
// safetensors_header.cpp; see Note [safetensors format] in kael/io/safetensors.h.
//
// Note [safetensors mmap]
// load_safetensors(path, mmap=true) maps the whole file once, MAP_PRIVATE with PROT_READ |
// PROT_WRITE over a descriptor opened read-only: the file can never be written through the
// mapping, and a write to a tensor makes the kernel copy the page it touches (copy-on-write),
// so the tensor shows the new values, the file and every other mapping of it keep the old
// ones. kael has no read-only tensors (torch.frombuffer's warning, Note in python_owner.cpp),
// so raising on writes is not an option without a flag checked by every in-place op.
// Each tensor is a Storage over its byte range whose deleter drops a reference to the mapping;
// the mapping goes when the last tensor (or view) dies. Bytes that cannot be shared are
// copied instead (that tensor alone, into the caching allocator): a range not aligned to its
// dtype (kael's kernels load aligned elements; files of the reference writer are always
// aligned) and bool data holding bytes other than 0 and 1 (Note [Bool bytes]). save_safetensors
// replaces a file by renaming a new one over it, so saving over a mapped file leaves the
// mapping intact; truncating a mapped file from elsewhere makes reads of the lost pages raise
// SIGBUS, as with every mapped file.
#include "kael/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "kael/core/concurrency.h"
#include "kael/core/convert.h"
#include "kael/core/storage.h"
#include "kael/core/tensor_impl.h"

namespace kael::io {

namespace {

using detail::quoted;

constexpr const char* kLoad = "load_safetensors";
constexpr const char* kSave = "save_safetensors";
constexpr const char* kMetadata = "read_safetensors_metadata";
// One read()/write() moves at most this much (Linux moves at most 0x7ffff000 bytes a call).
constexpr std::size_t kMaxIo = std::size_t{1} << 30;

[[noreturn]] void throw_os(int err, const char* op, const std::string& path, const char* what) {
  throw FileError(err, path, std::string(op) + ": " + what + ": " + std::strerror(err));
}

[[noreturn]] void throw_value(const char* op, const std::string& path, const std::string& reason) {
  kael::detail::throw_check<ValueError>(__FILE__, __LINE__, "the safetensors file is valid",
                                        std::string(op) + ": " + quoted(path, 400) + ": " + reason);
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at `offset`; a file that ends first has changed under us.
void pread_full(int fd, void* dst, std::size_t n, std::uint64_t offset, const char* op, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min(n, kMaxIo), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_os(errno, op, path, "reading the file failed");
    }
    if (r == 0) throw_value(op, path, "the file ended before the data its header describes (was it truncated?)");
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
}

struct OpenedFile {
  Fd fd;
  std::uint64_t size = 0;
  std::uint64_t data_start = 0;
  SafetensorsHeader header;
};

void open_and_parse(OpenedFile& f, const char* op, const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it has no effect on regular files).
  f.fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd.fd < 0) throw_os(errno, op, path, "cannot open the file");
  struct stat st{};
  if (::fstat(f.fd.fd, &st) != 0) throw_os(errno, op, path, "cannot stat the file");
  if (S_ISDIR(st.st_mode)) throw_os(EISDIR, op, path, "cannot read the file");
  if (!S_ISREG(st.st_mode)) throw_value(op, path, "not a regular file");
  f.size = static_cast<std::uint64_t>(st.st_size);
  if (f.size < 8)
    throw_value(op, path, "the file has " + std::to_string(f.size) + " bytes, too few for the 8-byte header length");
  unsigned char len[8];
  pread_full(f.fd.fd, len, 8, 0, op, path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kSafetensorsMaxHeader)
    throw_value(op, path, "header length " + std::to_string(n) + " exceeds the limit of " +
                              std::to_string(kSafetensorsMaxHeader) + " bytes");
  if (n > f.size - 8)
    throw_value(op, path, "header length " + std::to_string(n) + " reaches beyond the end of the file (" +
                              std::to_string(f.size) + " bytes)");
  std::string text(static_cast<std::size_t>(n), '\0');  // n was checked against the file's size
  pread_full(f.fd.fd, text.data(), text.size(), 8, op, path);
  f.data_start = 8 + n;
  f.header = parse_safetensors_header(text, f.size - f.data_start, op, path);
}

// The dtypes of every tensor are kael's (checked before any data is read).
void check_dtypes(const OpenedFile& f, const char* op, const std::string& path) {
  for (const auto& t : f.header.tensors)
    if (!t.dtype->kael)
      throw_value(op, path,
                  "tensor " + quoted(t.name) + ": dtype " + t.dtype->name +
                      " is not supported by kael (kael reads BOOL, U8, I8, I16, I32, I64, F16, BF16, F32 and F64)");
}

Tensor make_tensor(IntrusivePtr<Storage> storage, const SafetensorsTensorInfo& t) {
  const IntArrayRef sizes(t.shape.data(), t.shape.size());
  return Tensor(TensorImpl::make(std::move(storage), *t.dtype->kael, DimVector(sizes), contiguous_strides(sizes), 0));
}

// The mapping of a loaded file, shared by the tensors over it.
struct Mapping {
  void* base = nullptr;
  std::size_t length = 0;
  std::atomic<std::int64_t> refs{1};
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      ::munmap(base, length);
      delete this;
    }
  }
};

void release_mapping(void* context) noexcept { static_cast<Mapping*>(context)->release(); }

struct MappingRef {
  Mapping* m = nullptr;
  ~MappingRef() {
    if (m != nullptr) m->release();
  }
};

bool bool_bytes_ok(const unsigned char* p, std::size_t n) {
  unsigned char acc = 0;
  for (std::size_t i = 0; i < n; ++i) acc |= p[i];
  return acc <= 1;
}

NamedTensors by_name(NamedTensors out) {
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

// Buffers small writes; large contiguous ones go straight to the file.
class Writer {
 public:
  Writer(int fd, const std::string& path) : fd_(fd), path_(path), buf_(new char[kCapacity]) {}

  void write(const void* data, std::size_t n) {
    if (n >= kCapacity / 4) {
      flush();
      write_all(static_cast<const char*>(data), n);
      return;
    }
    if (len_ + n > kCapacity) flush();
    std::memcpy(buf_.get() + len_, data, n);
    len_ += n;
  }

  // n elements of `itemsize` bytes, `stride` bytes apart.
  void write_strided(const char* p, std::int64_t n, std::int64_t stride, std::size_t itemsize) {
    if (stride == static_cast<std::int64_t>(itemsize)) {
      write(p, static_cast<std::size_t>(n) * itemsize);
      return;
    }
    while (n > 0) {
      if (kCapacity - len_ < itemsize) flush();
      const auto room = static_cast<std::int64_t>((kCapacity - len_) / itemsize);
      const std::int64_t k = std::min(n, room);
      char* out = buf_.get() + len_;
      switch (itemsize) {
        case 1:
          for (std::int64_t i = 0; i < k; ++i) out[i] = p[i * stride];
          break;
        case 2: copy_elements<2>(out, p, k, stride); break;
        case 4: copy_elements<4>(out, p, k, stride); break;
        default: copy_elements<8>(out, p, k, stride); break;
      }
      len_ += static_cast<std::size_t>(k) * itemsize;
      p += k * stride;
      n -= k;
    }
  }

  void flush() {
    write_all(buf_.get(), len_);
    len_ = 0;
  }

 private:
  static constexpr std::size_t kCapacity = std::size_t{1} << 20;

  template <std::size_t N>
  static void copy_elements(char* out, const char* p, std::int64_t k, std::int64_t stride) {
    for (std::int64_t i = 0; i < k; ++i) std::memcpy(out + i * static_cast<std::int64_t>(N), p + i * stride, N);
  }

  void write_all(const char* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min(n, kMaxIo));
      if (w < 0) {
        if (errno == EINTR) continue;
        throw_os(errno, kSave, path_, "writing the file failed");
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }

  int fd_;
  const std::string& path_;
  std::unique_ptr<char[]> buf_;
  std::size_t len_ = 0;
};

// What the writer needs of a tensor, taken with the caller's lock held.
struct Source {
  const char* data;
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;  // in bytes
  std::size_t itemsize;
  bool contiguous;
};

void write_tensor(Writer& w, const Source& s) {
  std::int64_t numel = 1;
  for (std::int64_t d : s.sizes) numel *= d;
  if (numel == 0) return;
  if (s.contiguous || s.sizes.empty()) {
    w.write(s.data, static_cast<std::size_t>(numel) * s.itemsize);
    return;
  }
  // Rows along the last dim, the outer dims walked as an odometer.
  const std::size_t nd = s.sizes.size();
  std::vector<std::int64_t> index(nd, 0);
  const std::int64_t rows = numel / s.sizes[nd - 1];
  const char* row = s.data;
  for (std::int64_t r = 0; r < rows; ++r) {
    w.write_strided(row, s.sizes[nd - 1], s.strides[nd - 1], s.itemsize);
    for (std::size_t d = nd - 1; d-- > 0;) {
      row += s.strides[d];
      if (++index[d] < s.sizes[d]) break;
      row -= s.strides[d] * s.sizes[d];
      index[d] = 0;
    }
  }
}

// A name for the temporary file next to `path` that is not taken yet (O_EXCL).
int create_temporary(const std::string& path, std::string& tmp) {
  static std::atomic<std::uint64_t> counter{0};
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint64_t tag = (seed ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull)) & 0xFFFFFFFFFFull;
    tmp = dir + "." + base.substr(0, 200) + "." + std::to_string(::getpid()) + "-" + std::to_string(tag) + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw_os(errno, kSave, path, "cannot create the file");
  }
  throw_os(EEXIST, kSave, path, "cannot create a temporary file next to it");
}

}  // namespace

NamedTensors load_safetensors(const std::string& path, bool mmap) {
  OpenedFile f;
  open_and_parse(f, kLoad, path);
  check_dtypes(f, kLoad, path);
  NamedTensors out;
  out.reserve(f.header.tensors.size());
  UnlockedSection section;  // no Python object is touched below
  section.unlock();
  if (!mmap) {
    for (const auto& t : f.header.tensors) {
      const std::size_t nbytes = static_cast<std::size_t>(t.end - t.begin);
      auto storage = Storage::allocate(nbytes, kCPU, kLoad);
      if (nbytes > 0) pread_full(f.fd.fd, storage->data(), nbytes, f.data_start + t.begin, kLoad, path);
      if (*t.dtype->kael == ScalarType::Bool) normalize_bool_bytes(storage->data(), nbytes);
      out.emplace_back(t.name, make_tensor(std::move(storage), t));
    }
    return by_name(std::move(out));
  }
  void* base = ::mmap(nullptr, static_cast<std::size_t>(f.size), PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd.fd, 0);
  if (base == MAP_FAILED) throw_os(errno, kLoad, path, "cannot map the file");
  MappingRef mapping;  // the loader's own reference, dropped on return or on a throw
  mapping.m = new Mapping();
  mapping.m->base = base;
  mapping.m->length = static_cast<std::size_t>(f.size);
  for (const auto& t : f.header.tensors) {
    const std::size_t nbytes = static_cast<std::size_t>(t.end - t.begin);
    const ScalarType dtype = *t.dtype->kael;
    auto* p = static_cast<unsigned char*>(base) + f.data_start + t.begin;
    IntrusivePtr<Storage> storage;
    const bool aligned = reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(itemsize(dtype)) == 0;
    if (nbytes == 0) {
      storage = Storage::allocate(0, kCPU, kLoad);
    } else if (!aligned || (dtype == ScalarType::Bool && !bool_bytes_ok(p, nbytes))) {
      storage = Storage::allocate(nbytes, kCPU, kLoad);
      std::memcpy(storage->data(), p, nbytes);
      if (dtype == ScalarType::Bool) normalize_bool_bytes(storage->data(), nbytes);
    } else {
      mapping.m->refs.fetch_add(1, std::memory_order_relaxed);
      try {
        storage = Storage::external(p, nbytes, kCPU, &release_mapping, mapping.m);
      } catch (...) {
        mapping.m->release();
        throw;
      }
    }
    out.emplace_back(t.name, make_tensor(std::move(storage), t));
  }
  return by_name(std::move(out));
}

StringPairs read_safetensors_metadata(const std::string& path) {
  OpenedFile f;
  open_and_parse(f, kMetadata, path);
  return f.header.metadata ? std::move(*f.header.metadata) : StringPairs();
}

void save_safetensors(const NamedTensors& tensors, const std::string& path, const StringPairs* metadata) {
  // Every check runs before the file is touched.
  for (const auto& [name, t] : tensors) {
    KAEL_CHECK_VALUE(name != "__metadata__",
                     kSave << ": the name '__metadata__' is reserved for the file's metadata");
    KAEL_CHECK_VALUE(t.defined(), kSave << ": tensor " << quoted(name) << " is undefined");
    KAEL_CHECK_VALUE(t.device().is_cpu(), kSave << ": tensor " << quoted(name) << " is on " << t.device()
                                                << "; move it to the CPU first");
  }
  std::vector<std::size_t> order;
  const std::string header = serialize_safetensors_header(tensors, metadata, &order);
  // The tensors' memory stays valid while the caller's lock is dropped: held and pinned
  // (Note [Concurrency]); pins go with the lock held again.
  struct Pins {
    std::vector<IntrusivePtr<Storage>> storages;
    ~Pins() {
      for (auto& s : storages) s->unpin();
    }
  } pins;
  std::vector<Source> sources;
  sources.reserve(tensors.size());
  pins.storages.reserve(tensors.size());
  for (const std::size_t i : order) {
    const Tensor& t = tensors[i].second;
    const std::size_t item = static_cast<std::size_t>(t.element_size());
    Source s{static_cast<const char*>(t.data_ptr()), std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
             std::vector<std::int64_t>(t.strides().begin(), t.strides().end()), item, t.is_contiguous()};
    for (auto& st : s.strides) st *= static_cast<std::int64_t>(item);
    sources.push_back(std::move(s));
    Storage* storage = t.impl()->storage();
    storage->pin();
    pins.storages.push_back(IntrusivePtr<Storage>::borrow(storage));
  }
  std::string tmp;
  UnlockedSection section;
  section.unlock();
  Fd fd;
  fd.fd = create_temporary(path, tmp);
  try {
    Writer w(fd.fd, path);
    unsigned char len[8];
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i, n >>= 8) len[i] = static_cast<unsigned char>(n & 0xFF);
    w.write(len, 8);
    w.write(header.data(), header.size());
    for (const Source& s : sources) write_tensor(w, s);
    w.flush();
    const int closed = ::close(fd.fd);
    fd.fd = -1;
    if (closed != 0) throw_os(errno, kSave, path, "writing the file failed");
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_os(errno, kSave, path, "cannot replace the file");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

}  // namespace kael::io
