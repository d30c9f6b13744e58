// Shape ops over lists of tensors and with several results, composed of registered ops: stack,
// split, split_with_sizes, chunk (views) and einsum (Note [einsum]).
#include <algorithm>
#include <array>
#include <atomic>
#include <numeric>
#include <span>
#include <string_view>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "kael/ops/cat.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/permute.h"
#include "kael/ops/select.h"
#include "kael/ops/transpose.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sum.h"
#include "kael/ops/to.h"
#include "kael/ops/unsqueeze.h"

namespace kael::native {

// ------------------------------------------------------------------ stack, split, chunk

Tensor stack_impl(std::span<const Tensor> tensors, std::int64_t dim) {
  constexpr const char* op = "stack";
  KAEL_CHECK(!tensors.empty(), op << ": stack expects a non-empty TensorList");
  const std::int64_t d = wrap_dim(op, dim, tensors[0].dim() + 1);
  for (std::size_t i = 1; i < tensors.size(); ++i)
    KAEL_CHECK(std::ranges::equal(tensors[i].sizes(), tensors[0].sizes()),
               op << ": stack expects each tensor to be equal size, but got " << shape_str(tensors[0].sizes())
                  << " at entry 0 and " << shape_str(tensors[i].sizes()) << " at entry " << i);
  std::vector<Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const Tensor& t : tensors) pieces.push_back(kael::unsqueeze(t, d));
  return kael::cat(pieces, d);
}

std::vector<Tensor> split_impl(const Tensor& self, std::int64_t split_size, std::int64_t dim) {
  constexpr const char* op = "split";
  KAEL_CHECK(self.dim() > 0, op << ": split expects at least a 1-dimensional tensor");
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  KAEL_CHECK(split_size >= 0, op << ": split expects split_size be non-negative, but got split_size=" << split_size);
  KAEL_CHECK(split_size > 0 || size == 0, op << ": split_size can only be 0 if dimension size is 0, but got dimension "
                                                "size of "
                                             << size);
  // at least one piece (an empty one for an empty dim)
  const std::int64_t pieces = split_size == 0 ? 1 : std::max<std::int64_t>(size / split_size + (size % split_size != 0 ? 1 : 0), 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(pieces));
  for (std::int64_t i = 0; i < pieces; ++i) {
    const std::int64_t start = i * split_size;
    out.push_back(kael::narrow(self, d, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes_impl(const Tensor& self, IntArrayRef split_sizes, std::int64_t dim) {
  constexpr const char* op = "split_with_sizes";
  KAEL_CHECK(self.dim() > 0, op << ": split expects at least a 1-dimensional tensor");
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  std::int64_t total = 0;
  for (const std::int64_t s : split_sizes) {
    KAEL_CHECK(s >= 0, op << ": split_with_sizes expects split_sizes have only non-negative entries, but got "
                             "split_sizes="
                          << shape_str(split_sizes));
    KAEL_CHECK(!__builtin_add_overflow(total, s, &total), op << ": split_sizes " << shape_str(split_sizes)
                                                             << " overflow");
  }
  KAEL_CHECK(total == size, op << ": split_with_sizes expects split_sizes to sum exactly to " << size
                               << " (input tensor's size at dimension " << d << "), but got split_sizes="
                               << shape_str(split_sizes));
  std::vector<Tensor> out;
  std::int64_t start = 0;
  for (const std::int64_t s : split_sizes) {
    out.push_back(kael::narrow(self, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk_impl(const Tensor& self, std::int64_t chunks, std::int64_t dim) {
  constexpr const char* op = "chunk";
  KAEL_CHECK(self.dim() > 0, op << ": chunk expects at least a 1-dimensional tensor");
  KAEL_CHECK(chunks > 0, op << ": chunk expects `chunks` to be greater than 0, got: " << chunks);
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  const std::int64_t split_size = size / chunks + (size % chunks != 0 ? 1 : 0);
  if (split_size == 0 && size == 0) {
    // an empty dim gives `chunks` empty pieces, as in PyTorch
    const DimVector sizes(static_cast<std::size_t>(chunks), 0);
    return split_with_sizes_impl(self, sizes, d);
  }
  return split_impl(self, split_size, d);
}

// ------------------------------------------------------------------ einsum
//
// Note [einsum]
// einsum lowers to registered ops, as PyTorch's does: each operand's repeated subscripts become
// diagonals, every operand is permuted and unsqueezed to one common dim order (output dims first,
// then the summed subscripts), and operands are contracted left to right, two at a time, by one
// batched matmul: dims both have become the batch, dims one has stay, dims no later operand and
// the output use are summed (by the matmul when both have them, by sum otherwise).

namespace {

constexpr int kLabels = 52;  // A-Z then a-z (the order the implicit output sorts them in)
constexpr int kEllipsis = -1;

int label_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -2;
}
char char_of(int label) { return static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)); }

// The subscripts of one term ("ij...k"): labels, kEllipsis where "..." is.
std::vector<int> parse_term(std::string_view term, std::size_t start, const char* what, std::size_t which) {
  std::vector<int> out;
  bool ellipsis = false;
  for (std::size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      KAEL_CHECK(!ellipsis, "einsum(): found '.' for " << what << which << " for which an ellipsis was already found");
      KAEL_CHECK(term.substr(i, 3) == "...",
                 "einsum(): found '.' for " << what << which << " that is not part of any ellipsis");
      ellipsis = true;
      out.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int l = label_of(c);
    KAEL_CHECK(l >= 0, "einsum(): invalid subscript given at index " << start + i
                                                                     << " in the equation string, subscripts must be "
                                                                        "in [a-zA-Z]");
    out.push_back(l);
  }
  return out;
}

// Two aligned operands (one dim per common position) contracted over sum_dims (kept as size 1).
Tensor sumproduct_pair(Tensor left, Tensor right, const std::vector<bool>& sum_dim) {
  const std::int64_t n = left.dim();
  DimVector lro, lo, ro, summed;
  std::int64_t lro_size = 1, lo_size = 1, ro_size = 1, sum_size = 1;
  for (std::int64_t p = 0; p < n; ++p) {
    const bool sl = left.sizes()[p] != 1, sr = right.sizes()[p] != 1;
    if (sum_dim[p]) {
      if (sl && sr) {
        summed.push_back(p);
        sum_size *= left.sizes()[p];
      } else if (sl) {
        const std::int64_t d[] = {p};
        left = kael::sum(left, IntArrayRef(d), true, std::nullopt);
      } else if (sr) {
        const std::int64_t d[] = {p};
        right = kael::sum(right, IntArrayRef(d), true, std::nullopt);
      }
    } else if (sl && sr) {
      lro.push_back(p);
      lro_size *= left.sizes()[p];
    } else if (sl) {
      lo.push_back(p);
      lo_size *= left.sizes()[p];
    } else if (sr) {
      ro.push_back(p);
      ro_size *= right.sizes()[p];
    }
  }
  // nothing summed over both (an outer product, a Hadamard product, dims summed from one side
  // above): mul, which promotes mixed dtypes and takes bool, as in PyTorch; a dim summed over both
  // goes through matmul (one dtype, not bool)
  if (summed.empty()) return kael::mul(left, right);
  // the dims of size 1 in both (and those summed above) go last
  DimVector rest;
  for (std::int64_t p = 0; p < n; ++p)
    if (std::find(lro.begin(), lro.end(), p) == lro.end() && std::find(lo.begin(), lo.end(), p) == lo.end() &&
        std::find(ro.begin(), ro.end(), p) == ro.end() && std::find(summed.begin(), summed.end(), p) == summed.end())
      rest.push_back(p);
  auto concat = [](std::initializer_list<const DimVector*> parts) {
    DimVector out;
    for (const DimVector* part : parts)
      for (const std::int64_t d : *part) out.push_back(d);
    return out;
  };
  const DimVector lperm = concat({&lro, &lo, &summed, &ro, &rest});
  const DimVector rperm = concat({&lro, &summed, &ro, &lo, &rest});
  // (an integer operand summed above became int64, as torch's sum makes it: its bmm then refuses
  // the pair, as PyTorch's does)
  KAEL_CHECK(left.dtype() == right.dtype(), "einsum(): expected both operands of a contraction to have the same "
                                            "dtype, but got " << left.dtype() << " and " << right.dtype());
  const std::int64_t l3[] = {lro_size, lo_size, sum_size}, r3[] = {lro_size, sum_size, ro_size};
  const Tensor product =
      kael::matmul(kael::reshape(kael::permute(left, lperm), l3), kael::reshape(kael::permute(right, rperm), r3));
  // back to the common positions: [lro, lo, ro, everything else as 1]
  const DimVector order = concat({&lro, &lo, &ro, &summed, &rest});
  DimVector sizes;
  for (const std::int64_t p : lro) sizes.push_back(left.sizes()[p]);
  for (const std::int64_t p : lo) sizes.push_back(left.sizes()[p]);
  for (const std::int64_t p : ro) sizes.push_back(right.sizes()[p]);
  while (static_cast<std::int64_t>(sizes.size()) < n) sizes.push_back(1);
  DimVector inverse(n);
  for (std::int64_t i = 0; i < n; ++i) inverse[order[i]] = i;
  return kael::permute(kael::reshape(product, sizes), inverse);
}

// Where each subscript of an einsum sits among the common positions (an ellipsis: from ell_pos,
// ell_ndim of them).
struct EinsumPositions {
  std::array<std::int64_t, kLabels> pos;
  std::int64_t ell_pos, ell_ndim;
};

// Operand i of an einsum with subscripts `term`, aligned to the n common positions: a repeated
// subscript's diagonal taken, its dims permuted into position order, size-1 dims where it has no
// subscript; `has` marks the positions it has. Each size it brings is checked against (and
// recorded in) sizes, with the operand that set it in size_from.
Tensor align_operand(Tensor t, const std::vector<int>& term, std::size_t i, const EinsumPositions& at, std::int64_t n,
                     DimVector& sizes, std::vector<std::int64_t>& size_from, std::vector<bool>& has) {
  const std::array<std::int64_t, kLabels>& pos = at.pos;
  const std::int64_t ell_pos = at.ell_pos, ell_ndim = at.ell_ndim;
  std::int64_t labels = 0;
  for (const int l : term) labels += l == kEllipsis ? 0 : 1;
  const std::int64_t e = t.dim() - labels;  // dims under this operand's ellipsis
  DimVector target;             // the common position of each dim of t
  std::vector<int> labels_of;   // and its subscript (kEllipsis under the ellipsis)
  for (const int l : term) {
    if (l == kEllipsis) {
      for (std::int64_t k = 0; k < e; ++k) {
        target.push_back(ell_pos + (ell_ndim - e) + k);
        labels_of.push_back(kEllipsis);
      }
    } else {
      target.push_back(pos[l]);
      labels_of.push_back(l);
    }
  }
  // a subscript repeated within the operand: its diagonal
  for (std::int64_t a = 0; a < static_cast<std::int64_t>(target.size()); ++a) {
    for (std::int64_t b = a + 1; b < static_cast<std::int64_t>(target.size()); ++b) {
      if (target[a] != target[b]) continue;
      KAEL_CHECK(t.sizes()[a] == t.sizes()[b], "einsum(): subscript " << char_of(labels_of[a])
                                                                      << " is repeated for operand " << i
                                                                      << " but the sizes don't match, "
                                                                      << t.sizes()[b] << " != " << t.sizes()[a]);
      t = kael::diagonal(t, 0, a, b);
      const std::int64_t p = target[a];
      const int label = labels_of[a];
      target.erase(static_cast<std::size_t>(b));
      target.erase(static_cast<std::size_t>(a));
      target.push_back(p);
      labels_of.erase(labels_of.begin() + b);
      labels_of.erase(labels_of.begin() + a);
      labels_of.push_back(label);
      b = a;  // rescan from a
    }
  }
  // permute into position order, then unsqueeze the positions t lacks
  DimVector perm(target.size());
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  std::sort(perm.begin(), perm.end(), [&](std::int64_t x, std::int64_t y) { return target[x] < target[y]; });
  t = kael::permute(t, perm);
  has.assign(static_cast<std::size_t>(n), false);
  for (std::size_t k = 0; k < perm.size(); ++k) {
    const std::int64_t p = target[perm[k]];
    has[p] = true;
    const std::int64_t s = t.sizes()[k];
    if (sizes[p] == 1 && s != 1) {
      sizes[p] = s;
      size_from[p] = static_cast<std::int64_t>(i);
    } else {
      KAEL_CHECK(s == 1 || s == sizes[p], "einsum(): the size " << s << " of dimension " << k
                                                                 << " of operand " << i
                                                                 << " does not broadcast with the size "
                                                                 << sizes[p] << " of operand " << size_from[p]);
    }
  }
  DimVector full;
  {
    std::size_t k = 0;
    for (std::int64_t p = 0; p < n; ++p) full.push_back(has[p] ? t.sizes()[k++] : 1);
  }
  return kael::reshape(t, full);
}

}  // namespace

Tensor einsum_impl(std::string_view equation, std::span<const Tensor> operands) {
  KAEL_CHECK(!operands.empty(), "einsum(): must provide at least one operand");
  const std::size_t arrow = equation.find("->");
  const std::string_view lhs = equation.substr(0, arrow);
  // the input terms
  std::vector<std::vector<int>> terms;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = lhs.find(',', start);
    const std::string_view term = lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    KAEL_CHECK(terms.size() < operands.size(), "einsum(): fewer operands were provided than specified in the equation");
    terms.push_back(parse_term(term, start, "operand ", terms.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  KAEL_CHECK(terms.size() == operands.size(), "einsum(): more operands were provided than specified in the equation");
  std::int64_t ell_ndim = 0;
  std::array<int, kLabels> count{};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    check_same_device("einsum", operands[0].device(), t.device());
    std::int64_t labels = 0;
    bool has_ellipsis = false;
    for (const int l : terms[i]) {
      if (l == kEllipsis) {
        has_ellipsis = true;
      } else {
        ++labels;
        ++count[l];
      }
    }
    if (has_ellipsis) {
      KAEL_CHECK(labels <= t.dim(), "einsum(): the number of subscripts in the equation (" << labels
                                                                                         << ") is more than the "
                                                                                            "number of "
                                                                                            "dimensions ("
                                                                                         << t.dim()
                                                                                         << ") for operand "
                                                                                         << i);
      ell_ndim = std::max(ell_ndim, t.dim() - labels);
    } else {
      KAEL_CHECK(labels == t.dim(), "einsum(): the number of subscripts in the equation ("
                                        << labels << ") does not match the number of dimensions (" << t.dim()
                                        << ") for operand " << i << " and no ellipsis was given");
    }
  }
  // the output term, given or implicit (the ellipsis dims, then the labels seen once, sorted)
  std::vector<int> output;
  if (arrow != std::string_view::npos) {
    output = parse_term(equation.substr(arrow + 2), arrow + 2, "the output", 0);
    std::array<bool, kLabels> seen{};
    for (const int l : output) {
      if (l == kEllipsis) continue;
      KAEL_CHECK(count[l] > 0, "einsum(): output subscript " << char_of(l)
                                                             << " does not appear in the equation for any input "
                                                                "operand");
      KAEL_CHECK(!seen[l], "einsum(): output subscript " << char_of(l) << " appears more than once in the output");
      seen[l] = true;
    }
  } else {
    output.push_back(kEllipsis);
    for (int l = 0; l < kLabels; ++l)
      if (count[l] == 1) output.push_back(l);
  }
  // common positions: the output's dims in order, then the ellipsis dims the output leaves out,
  // then the other labels
  std::array<std::int64_t, kLabels> pos;
  pos.fill(-1);
  std::int64_t n = 0, ell_pos = -1;
  for (const int l : output) {
    if (l == kEllipsis) {
      ell_pos = n;
      n += ell_ndim;
    } else {
      pos[l] = n++;
    }
  }
  const std::int64_t out_ndim = n;
  if (ell_pos < 0) {
    ell_pos = n;
    n += ell_ndim;
  }
  for (int l = 0; l < kLabels; ++l)
    if (count[l] > 0 && pos[l] < 0) pos[l] = n++;
  check_max_dims("einsum", n);
  const EinsumPositions labels_at{pos, ell_pos, ell_ndim};
  // each operand aligned to the common positions
  std::vector<Tensor> aligned;
  std::vector<std::vector<bool>> present;
  DimVector sizes(n, 1);
  std::vector<std::int64_t> size_from(n, -1);  // operand that set sizes[p]
  for (std::size_t i = 0; i < operands.size(); ++i) {
    std::vector<bool> has;
    aligned.push_back(align_operand(operands[i], terms[i], i, labels_at, n, sizes, size_from, has));
    present.push_back(std::move(has));
  }
  // contract left to right
  Tensor result = aligned[0];
  for (std::size_t i = 1; i < aligned.size(); ++i) {
    std::vector<bool> sum_dim(n, false);
    for (std::int64_t p = out_ndim; p < n; ++p) {
      bool later = false;
      for (std::size_t j = i + 1; j < aligned.size() && !later; ++j) later = present[j][p];
      sum_dim[p] = !later;
    }
    result = sumproduct_pair(result, aligned[i], sum_dim);
  }
  if (n > out_ndim) {
    if (aligned.size() > 1) {
      // the contractions left every summed dim of size 1: drop them (a view, as PyTorch's; a sum
      // would turn an integer result into int64)
      return kael::reshape(result, IntArrayRef(result.sizes().data(), static_cast<std::size_t>(out_ndim)));
    }
    DimVector rest;
    for (std::int64_t p = out_ndim; p < n; ++p) rest.push_back(p);
    result = kael::sum(result, IntArrayRef(rest), false, std::nullopt);
  }
  return result;
}

// unbind, movedim, swapaxes: views through select, permute and transpose (so autograd and every
// device see those).
std::vector<Tensor> unbind(const Tensor& self, std::int64_t dim) {
  KAEL_CHECK_INDEX(self.dim() > 0, "unbind: Dimension specified as " << dim << " but tensor has no dimensions");
  const std::int64_t d = wrap_dim("unbind", dim, self.dim());
  std::vector<Tensor> out;
  out.reserve(static_cast<std::size_t>(self.sizes()[d]));
  for (std::int64_t i = 0; i < self.sizes()[d]; ++i) out.push_back(kael::select(self, d, i));
  return out;
}

Tensor movedim(const Tensor& self, IntArrayRef source, IntArrayRef destination) {
  constexpr const char* op = "movedim";
  const std::int64_t n = self.dim();
  KAEL_CHECK(source.size() == destination.size(),
             op << ": Invalid source or destination dims: source (" << shape_str(source) << " dims) should "
                << "contain the same number of dims as destination (" << shape_str(destination) << " dims)");
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n), -1);
  std::vector<bool> used_src(static_cast<std::size_t>(n), false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    const std::int64_t s = wrap_dim(op, source[i], n), d = wrap_dim(op, destination[i], n);
    KAEL_CHECK(!used_src[static_cast<std::size_t>(s)], op << ": repeated dim in `source` (" << shape_str(source) << ")");
    KAEL_CHECK(perm[static_cast<std::size_t>(d)] == -1, op << ": repeated dim in `destination` ("
                                                            << shape_str(destination) << ")");
    used_src[static_cast<std::size_t>(s)] = true;
    perm[static_cast<std::size_t>(d)] = s;
  }
  // the other dims keep their order, in the positions left
  std::int64_t next = 0;
  for (std::int64_t& p : perm) {
    if (p != -1) continue;
    while (used_src[static_cast<std::size_t>(next)]) ++next;
    p = next++;
  }
  return kael::permute(self, IntArrayRef(perm));
}

Tensor movedim_int(const Tensor& self, std::int64_t source, std::int64_t destination) {
  const std::int64_t from[] = {source}, to[] = {destination};
  return movedim(self, IntArrayRef(from), IntArrayRef(to));
}

Tensor swapaxes(const Tensor& self, std::int64_t axis0, std::int64_t axis1) { return kael::transpose(self, axis0, axis1); }

Tensor adjoint(const Tensor& self) {
  if (self.dim() == 0) {
    // once per process, as PyTorch's TORCH_WARN_ONCE
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      warn(WarningKind::User, "adjoint() is deprecated on 0-D tensors. Consider using x.conj().");
    return self;
  }
  KAEL_CHECK(self.dim() >= 2, "adjoint: tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                                  << self.dim() << "-D tensor.");
  return kael::transpose(self, -2, -1);
}

// The registry's kernels.
Tensor stack(TensorList tensors, std::int64_t dim) { return stack_impl(tensors, dim); }
std::vector<Tensor> split(const Tensor& self, std::int64_t split_size, std::int64_t dim) {
  return split_impl(self, split_size, dim);
}
std::vector<Tensor> split_sizes(const Tensor& self, IntArrayRef split_size, std::int64_t dim) {
  return split_with_sizes_impl(self, split_size, dim);
}
std::vector<Tensor> split_with_sizes(const Tensor& self, IntArrayRef split_sizes, std::int64_t dim) {
  return split_with_sizes_impl(self, split_sizes, dim);
}
std::vector<Tensor> chunk(const Tensor& self, std::int64_t chunks, std::int64_t dim) {
  return chunk_impl(self, chunks, dim);
}
Tensor einsum(std::string_view equation, TensorList tensors) { return einsum_impl(equation, tensors); }

}  // namespace kael::native
