#pragma once
// A small vector of int64 with inline room for kInline elements; shapes and strides of up
// to kInline dims never touch the heap.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>

namespace kael {

using IntArrayRef = std::span<const std::int64_t>;

class DimVector {
 public:
  static constexpr std::size_t kInline = 5;

  DimVector() noexcept = default;
  explicit DimVector(std::size_t n, std::int64_t value = 0) { assign(n, value); }
  DimVector(IntArrayRef values) { assign(values); }  // NOLINT: implicit from spans is intended
  DimVector(std::initializer_list<std::int64_t> values)
      : DimVector(IntArrayRef(values.begin(), values.size())) {}
  DimVector(const DimVector& o) { assign(o.view()); }
  DimVector(DimVector&& o) noexcept { steal(o); }
  DimVector& operator=(const DimVector& o) {
    if (this != &o) assign(o.view());
    return *this;
  }
  DimVector& operator=(DimVector&& o) noexcept {
    if (this != &o) {
      free_heap();
      steal(o);
    }
    return *this;
  }
  ~DimVector() { free_heap(); }

  void assign(std::size_t n, std::int64_t value) {
    resize_uninitialized(n);
    std::fill(data_, data_ + n, value);
  }
  void assign(IntArrayRef values) {
    resize_uninitialized(values.size());
    // values never alias data_ except through self-assignment, which operator= skips
    for (std::size_t i = 0; i < values.size(); ++i) data_[i] = values[i];
  }
  void resize(std::size_t n, std::int64_t value = 0) {
    const std::size_t old = size_;
    reserve(n);
    for (std::size_t i = old; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void push_back(std::int64_t v) {
    reserve(size_ + 1);
    data_[size_++] = v;
  }
  void insert(std::size_t pos, std::int64_t v) {
    reserve(size_ + 1);
    std::memmove(data_ + pos + 1, data_ + pos, (size_ - pos) * sizeof(std::int64_t));
    data_[pos] = v;
    ++size_;
  }
  void erase(std::size_t pos) {
    std::memmove(data_ + pos, data_ + pos + 1, (size_ - pos - 1) * sizeof(std::int64_t));
    --size_;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }

  std::int64_t* data() noexcept { return data_; }
  const std::int64_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::int64_t& operator[](std::size_t i) noexcept { return data_[i]; }
  std::int64_t operator[](std::size_t i) const noexcept { return data_[i]; }
  std::int64_t& back() noexcept { return data_[size_ - 1]; }
  const std::int64_t& back() const noexcept { return data_[size_ - 1]; }
  std::int64_t* begin() noexcept { return data_; }
  std::int64_t* end() noexcept { return data_ + size_; }
  const std::int64_t* begin() const noexcept { return data_; }
  const std::int64_t* end() const noexcept { return data_ + size_; }
  IntArrayRef view() const noexcept { return {data_, size_}; }
  operator IntArrayRef() const noexcept { return view(); }  // NOLINT: implicit by design

  bool operator==(const DimVector& o) const noexcept {
    return size_ == o.size_ && std::equal(begin(), end(), o.begin());
  }

  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    std::size_t cap = std::max<std::size_t>(n, capacity_ * 2);
    auto* heap = new std::int64_t[cap];
    if (size_) std::memcpy(heap, data_, size_ * sizeof(std::int64_t));
    free_heap();
    data_ = heap;
    capacity_ = cap;
  }

 private:
  void resize_uninitialized(std::size_t n) {
    reserve(n);
    size_ = n;
  }
  void free_heap() noexcept {
    if (data_ != inline_) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
  }
  void steal(DimVector& o) noexcept {
    if (o.data_ == o.inline_) {
      data_ = inline_;
      capacity_ = kInline;
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(std::int64_t));
    } else {
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.data_ = o.inline_;
      o.capacity_ = kInline;
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  std::int64_t inline_[kInline];
  std::int64_t* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t capacity_ = kInline;
};

}  // namespace kael
