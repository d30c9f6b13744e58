// The safetensors header: a strict, schema-directed JSON parser and validator (Note
// [safetensors parsing] in kael/io/safetensors.h) and the reference writer's serialisation.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "kael/core/tensor_impl.h"
#include "kael/io/safetensors.h"

namespace kael::io {

namespace {

// In the reference's order (increasing alignment): the writer sorts by it, descending.
constexpr SafetensorsDtype kDtypes[] = {
    {"BOOL", 8, ScalarType::Bool},
    {"F4", 4, std::nullopt},
    {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},
    {"U8", 8, ScalarType::UInt8},
    {"I8", 8, ScalarType::Int8},
    {"F8_E5M2", 8, std::nullopt},
    {"F8_E4M3", 8, std::nullopt},
    {"F8_E8M0", 8, std::nullopt},
    {"I16", 16, ScalarType::Int16},
    {"U16", 16, std::nullopt},
    {"F16", 16, ScalarType::Float16},
    {"BF16", 16, ScalarType::BFloat16},
    {"I32", 32, ScalarType::Int32},
    {"U32", 32, std::nullopt},
    {"F32", 32, ScalarType::Float32},
    {"C64", 64, std::nullopt},
    {"F64", 64, ScalarType::Float64},
    {"I64", 64, ScalarType::Int64},
    {"U64", 64, std::nullopt},
};

int dtype_rank(ScalarType t) {
  for (int i = 0; i < static_cast<int>(std::size(kDtypes)); ++i)
    if (kDtypes[i].kael == t) return i;
  KAEL_INTERNAL_ASSERT(false);
  return -1;
}

using detail::quoted;

constexpr std::uint64_t kMaxInt = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string range_string(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

// Length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates, at most
// U+10FFFF), or 0.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  auto cont = [&](std::size_t k) { return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::uint64_t data_size, const char* op, std::string_view file)
      : s_(text), data_size_(data_size), op_(op), file_(file) {}

  SafetensorsHeader parse() {
    for (std::size_t i = 0; i < s_.size();) {
      const std::size_t n = utf8_sequence(s_, i);
      if (n == 0) fail("the header is not valid UTF-8 (byte " + std::to_string(i) + " of the header)");
      i += n;
    }
    skip_ws();
    if (at_end() || s_[pos_] != '{') fail("the header must be a JSON object, found " + found());
    ++pos_;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        skip_ws();
        if (peek() != '"') syntax("expected a string key");
        std::string key = parse_string();
        skip_ws();
        expect(':');
        skip_ws();
        if (key == "__metadata__") {
          if (out_.metadata) fail("duplicate key '__metadata__'");
          parse_metadata();
        } else {
          tensor_ = &out_.tensors.emplace_back();
          tensor_->name = std::move(key);
          parse_tensor();
          tensor_ = nullptr;
        }
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_ws();
    if (!at_end()) syntax("unexpected characters after the JSON object");
    validate();
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    std::ostringstream msg;
    msg << op_ << ": " << quoted(file_, 400) << ": ";
    if (tensor_ != nullptr) msg << "tensor " << quoted(tensor_->name) << ": ";
    msg << reason;
    kael::detail::throw_check<ValueError>(__FILE__, __LINE__, "the safetensors header is valid", msg.str());
  }
  [[noreturn]] void syntax(const std::string& what) const {
    fail("invalid JSON in the header at byte " + std::to_string(pos_) + ": " + what + ", found " + found());
  }
  std::string found() const {
    if (at_end()) return "the end of the header";
    const std::string_view rest = s_.substr(pos_, 16);
    return quoted(rest, 16);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_ws() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) syntax(std::string("expected '") + c + "'");
    ++pos_;
  }

  // What kind of JSON value starts here (for messages).
  std::string value_kind() const {
    switch (peek()) {
      case '{': return "an object";
      case '[': return "an array";
      case '"': return "a string";
      case 't':
      case 'f': return "a boolean";
      case 'n': return "null";
      default: break;
    }
    if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return "a number";
    return found();
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) syntax("incomplete \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else {
        --pos_;
        syntax("invalid hex digit in a \\u escape");
      }
    }
    return v;
  }

  // A JSON string at pos_ (which is '"'); the result is valid UTF-8.
  std::string parse_string() {
    ++pos_;
    std::string out;
    for (;;) {
      if (at_end()) syntax("unterminated string");
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) syntax("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) syntax("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) syntax("lone low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.size() - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u')
              syntax("lone high surrogate in a \\u escape");
            pos_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) syntax("lone high surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          syntax("invalid escape");
      }
    }
  }

  // A JSON number that must be an integer in [0, 2^63 - 1] (a dim or an offset).
  std::uint64_t parse_count(const char* what) {
    const std::size_t start = pos_;
    bool negative = false, fraction = false, overflow = false;
    if (peek() == '-') {
      negative = true;
      ++pos_;
    }
    if (!(peek() >= '0' && peek() <= '9')) {
      pos_ = start;
      fail(std::string(what) + " must be a non-negative integer, found " + value_kind());
    }
    std::uint64_t v = 0;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') syntax("leading zero in a number");
    } else {
      while (peek() >= '0' && peek() <= '9') {
        const auto d = static_cast<std::uint64_t>(peek() - '0');
        if (v > (kMaxInt - d) / 10) overflow = true;
        else v = v * 10 + d;
        ++pos_;
      }
    }
    if (peek() == '.') {
      fraction = true;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) syntax("expected a digit after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      fraction = true;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) syntax("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    const std::string text(s_.substr(start, std::min<std::size_t>(pos_ - start, 40)));
    if (negative) fail(std::string(what) + " must not be negative, found " + text);
    if (fraction) fail(std::string(what) + " must be an integer, found " + text);
    if (overflow) fail(std::string(what) + " " + text + " does not fit in 64-bit signed integers (integer overflow)");
    return v;
  }

  void parse_metadata() {
    if (peek() != '{') fail("'__metadata__' must be an object of strings, found " + value_kind());
    ++pos_;
    auto& md = out_.metadata.emplace();
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') syntax("expected a string key in '__metadata__'");
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (peek() != '"') fail("'__metadata__' value of key " + quoted(key) + " must be a string, found " + value_kind());
      std::string value = parse_string();
      md.emplace_back(std::move(key), std::move(value));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      break;
    }
    // duplicate keys
    std::vector<std::string_view> keys;
    keys.reserve(md.size());
    for (const auto& kv : md) keys.emplace_back(kv.first);
    std::sort(keys.begin(), keys.end());
    const auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) fail("duplicate key " + quoted(*dup) + " in '__metadata__'");
  }

  void parse_tensor() {
    SafetensorsTensorInfo& t = *tensor_;
    if (peek() != '{') fail("the entry must be an object with dtype, shape and data_offsets, found " + value_kind());
    ++pos_;
    bool have_dtype = false, have_shape = false, have_offsets = false;
    skip_ws();
    if (peek() != '}') {
      for (;;) {
        skip_ws();
        if (peek() != '"') syntax("expected a string key");
        const std::string key = parse_string();
        skip_ws();
        expect(':');
        skip_ws();
        if (key == "dtype") {
          if (have_dtype) fail("duplicate key 'dtype'");
          have_dtype = true;
          if (peek() != '"') fail("dtype must be a string, found " + value_kind());
          const std::string name = parse_string();
          t.dtype = find_safetensors_dtype(name);
          if (t.dtype == nullptr) fail("unknown dtype " + quoted(name));
        } else if (key == "shape") {
          if (have_shape) fail("duplicate key 'shape'");
          have_shape = true;
          parse_array("shape", "a dim", [&](std::uint64_t v) {
            if (static_cast<std::int64_t>(t.shape.size()) >= kMaxDims)
              fail("shape has more than " + std::to_string(kMaxDims) + " dims");
            t.shape.push_back(static_cast<std::int64_t>(v));
          });
        } else if (key == "data_offsets") {
          if (have_offsets) fail("duplicate key 'data_offsets'");
          have_offsets = true;
          int n = 0;
          parse_array("data_offsets", "an offset", [&](std::uint64_t v) {
            if (n == 2) fail("data_offsets must hold exactly 2 integers, found more");
            (n == 0 ? t.begin : t.end) = v;
            ++n;
          });
          if (n != 2) fail("data_offsets must hold exactly 2 integers, found " + std::to_string(n));
        } else {
          fail("unexpected key " + quoted(key) + " (an entry has dtype, shape and data_offsets)");
        }
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        break;
      }
    }
    if (!have_dtype) fail("missing key 'dtype'");
    if (!have_shape) fail("missing key 'shape'");
    if (!have_offsets) fail("missing key 'data_offsets'");
  }

  template <typename F>
  void parse_array(const char* key, const char* what, F&& add) {
    if (peek() != '[') fail(std::string(key) + " must be an array of integers, found " + value_kind());
    ++pos_;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      add(parse_count((std::string(key) + ": " + what).c_str()));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return;
    }
  }

  void validate() {
    auto& ts = out_.tensors;
    // names: no duplicates
    {
      std::vector<std::size_t> by_name(ts.size());
      for (std::size_t i = 0; i < ts.size(); ++i) by_name[i] = i;
      std::sort(by_name.begin(), by_name.end(), [&](std::size_t a, std::size_t b) { return ts[a].name < ts[b].name; });
      for (std::size_t i = 1; i < by_name.size(); ++i) {
        if (ts[by_name[i]].name == ts[by_name[i - 1]].name) {
          tensor_ = &ts[by_name[i]];
          fail("duplicate tensor name " + quoted(tensor_->name));
        }
      }
    }
    for (auto& t : ts) {
      tensor_ = &t;
      if (t.begin > t.end) fail("data_offsets " + range_string(t.begin, t.end) + " end before they begin");
      if (t.end > data_size_)
        fail("data_offsets " + range_string(t.begin, t.end) + " reach beyond the data section of " +
             std::to_string(data_size_) + " bytes");
      // The product of the non-zero dims must fit (so strides do), as kael's own shapes.
      std::uint64_t numel = 1;
      bool zero = false;
      for (std::int64_t d : t.shape) {
        const auto u = static_cast<std::uint64_t>(d);
        if (u == 0) {
          zero = true;
          continue;
        }
        if (numel > kMaxInt / u)
          fail("shape " + shape_string(t.shape) + " has more than 2^63 - 1 elements (integer overflow)");
        numel *= u;
      }
      if (zero) numel = 0;
      const auto bits = static_cast<std::uint64_t>(t.dtype->bits);
      if (numel > std::numeric_limits<std::uint64_t>::max() / bits)
        fail("shape " + shape_string(t.shape) + " of " + t.dtype->name + " needs more than 2^64 bits (integer overflow)");
      const std::uint64_t nbits = numel * bits;
      if (nbits % 8 != 0)
        fail("shape " + shape_string(t.shape) + " of " + t.dtype->name + " does not fill whole bytes");
      if (nbits / 8 != t.end - t.begin)
        fail("shape " + shape_string(t.shape) + " of " + t.dtype->name + " needs " + std::to_string(nbits / 8) +
             " bytes, but data_offsets " + range_string(t.begin, t.end) + " hold " + std::to_string(t.end - t.begin));
    }
    tensor_ = nullptr;
    std::stable_sort(ts.begin(), ts.end(), [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t covered = 0;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      tensor_ = &ts[i];
      if (ts[i].begin < covered)
        fail("data_offsets " + range_string(ts[i].begin, ts[i].end) + " overlap those of tensor " +
             quoted(ts[i - 1].name) + " " + range_string(ts[i - 1].begin, ts[i - 1].end));
      if (ts[i].begin > covered)
        fail("data_offsets " + range_string(ts[i].begin, ts[i].end) + " leave bytes [" + std::to_string(covered) +
             ", " + std::to_string(ts[i].begin) + ") of the data section to no tensor");
      covered = ts[i].end;
    }
    tensor_ = nullptr;
    if (covered != data_size_)
      fail("the tensors cover " + std::to_string(covered) + " bytes, but the data section holds " +
           std::to_string(data_size_) + " bytes");
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::uint64_t data_size_;
  const char* op_;
  std::string_view file_;
  SafetensorsHeader out_;
  SafetensorsTensorInfo* tensor_ = nullptr;  // the entry being parsed or checked
};

// serde_json's string escapes.
void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

}  // namespace

namespace detail {

std::string quoted(std::string_view s, std::size_t limit) {
  std::string out = "'";
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t n = utf8_sequence(s, i);
    if (i + std::max<std::size_t>(n, 1) > limit) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (n > 1) {
      out.append(s.substr(i, n));  // valid UTF-8 beyond ASCII stays readable
      i += n;
      continue;
    }
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (n == 1 && c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
    ++i;
  }
  out += '\'';
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace detail

const SafetensorsDtype* find_safetensors_dtype(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const char* safetensors_dtype_name(ScalarType t) { return kDtypes[dtype_rank(t)].name; }

SafetensorsHeader parse_safetensors_header(std::string_view text, std::uint64_t data_size, const char* op,
                                           std::string_view file) {
  return HeaderParser(text, data_size, op, file).parse();
}

std::string serialize_safetensors_header(const NamedTensors& tensors, const StringPairs* metadata,
                                         std::vector<std::size_t>* order) {
  std::vector<std::size_t> idx(tensors.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    const int ra = dtype_rank(tensors[a].second.dtype()), rb = dtype_rank(tensors[b].second.dtype());
    return ra != rb ? ra > rb : tensors[a].first < tensors[b].first;
  });
  std::string out = "{";
  bool first = true;
  if (metadata != nullptr) {
    out += "\"__metadata__\":{";
    for (std::size_t i = 0; i < metadata->size(); ++i) {
      if (i > 0) out += ',';
      append_json_string(out, (*metadata)[i].first);
      out += ':';
      append_json_string(out, (*metadata)[i].second);
    }
    out += '}';
    first = false;
  }
  std::uint64_t offset = 0;
  for (const std::size_t i : idx) {
    const Tensor& t = tensors[i].second;
    if (!first) out += ',';
    first = false;
    append_json_string(out, tensors[i].first);
    out += ":{\"dtype\":\"";
    out += safetensors_dtype_name(t.dtype());
    out += "\",\"shape\":[";
    for (std::int64_t d = 0; d < t.dim(); ++d) {
      if (d > 0) out += ',';
      out += std::to_string(t.sizes()[static_cast<std::size_t>(d)]);
    }
    const auto nbytes = static_cast<std::uint64_t>(t.numel()) * static_cast<std::uint64_t>(t.element_size());
    out += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  out += '}';
  out.append((8 - out.size() % 8) % 8, ' ');
  if (order != nullptr) *order = std::move(idx);
  return out;
}

}  // namespace kael::io
