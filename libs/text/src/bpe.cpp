// GPT-2's pre-tokeniser and byte-level BPE encoding (Note [BPE tokenizer] in kael/text/bpe.h).
#include "kael/text/bpe.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <sstream>

#include "kael/core/error.h"
#include "kael/text/unicode_tables.h"

namespace kael::text {

const char* const kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";

bool is_gpt2_pattern(std::string_view pattern) noexcept {
  // tiktoken's spelling (possessive quantifiers, `\s++$`), its earlier one, and GPT-2's original:
  // the same matches (`\s++$` and `\s+(?!\S)` agree at the end of the text, and `\s` after
  // `\s+(?!\S)` only ever meets one white-space character).
  static constexpr std::string_view kSpellings[] = {
      R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)",
      R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
  };
  return std::find(std::begin(kSpellings), std::end(kSpellings), pattern) != std::end(kSpellings);
}

const char* unicode_version() noexcept { return unicode_data::kUnicodeVersion; }

namespace {

inline CharClass class_of(std::uint32_t cp) noexcept {
  if (cp > unicode_data::kMaxCodePoint) return CharClass::Other;
  const std::uint32_t block = unicode_data::kStage1[cp >> unicode_data::kBlockShift];
  return static_cast<CharClass>(
      unicode_data::kStage2[(block << unicode_data::kBlockShift) | (cp & ((1u << unicode_data::kBlockShift) - 1))]);
}

struct CodePoint {
  std::uint32_t cp;   // 0xFFFFFFFF for an invalid byte
  std::uint32_t len;  // bytes
};

inline bool continuation(unsigned char c) noexcept { return (c & 0xC0) == 0x80; }

// One code point of well-formed UTF-8 at s (n >= 1 bytes left); an ill-formed byte is one unit.
inline CodePoint decode(const unsigned char* s, std::size_t n) noexcept {
  const std::uint32_t c = s[0];
  if (c < 0x80) return {c, 1};
  if (c >= 0xC2 && c < 0xE0) {
    if (n >= 2 && continuation(s[1])) return {((c & 0x1F) << 6) | (s[1] & 0x3Fu), 2};
  } else if (c >= 0xE0 && c < 0xF0) {
    if (n >= 3 && continuation(s[1]) && continuation(s[2])) {
      const std::uint32_t cp = ((c & 0x0F) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (c >= 0xF0 && c < 0xF5) {
    if (n >= 4 && continuation(s[1]) && continuation(s[2]) && continuation(s[3])) {
      const std::uint32_t cp =
          ((c & 0x07) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
  }
  return {0xFFFFFFFFu, 1};
}

inline CharClass class_at(const unsigned char* s, std::size_t n, std::uint32_t& len) noexcept {
  if (s[0] < 0x80) {
    len = 1;
    return class_of(s[0]);
  }
  const CodePoint c = decode(s, n);
  len = c.len;
  return class_of(c.cp);
}

// The end of the run of code points of class k starting at pos.
inline std::size_t run_end(const unsigned char* s, std::size_t n, std::size_t pos, CharClass k) noexcept {
  while (pos < n) {
    std::uint32_t len = 0;
    if (class_at(s + pos, n - pos, len) != k) break;
    pos += len;
  }
  return pos;
}

// Hash of a token's bytes for the rank table.
inline std::uint64_t hash_bytes(const char* data, std::size_t size) noexcept {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (size * 0xFF51AFD7ED558CCDull);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  if (i < size) {
    std::uint64_t w = 0;
    std::memcpy(&w, data + i, size - i);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  h *= 0x94D049BB133111EBull;
  h ^= h >> 32;
  return h;
}

constexpr std::size_t kSmallPiece = 128;  // pieces up to this many bytes merge by linear scans

[[noreturn]] void fail(const std::string& message) { throw ValueError(message); }

std::string printable(std::string_view bytes) {
  std::ostringstream out;
  out << "b'";
  for (unsigned char c : bytes) {
    if (c == '\\' || c == '\'') {
      out << '\\' << c;
    } else if (c >= 0x20 && c < 0x7F) {
      out << c;
    } else {
      static const char* digits = "0123456789abcdef";
      out << "\\x" << digits[c >> 4] << digits[c & 15];
    }
  }
  out << "'";
  return out.str();
}

}  // namespace

CharClass char_class(std::uint32_t code_point) noexcept { return class_of(code_point); }

std::size_t gpt2_piece_end(std::string_view text, std::size_t pos) noexcept {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  const unsigned char c0 = s[pos];
  // 's|'t|'re|'ve|'m|'ll|'d
  if (c0 == '\'' && pos + 1 < n) {
    const unsigned char c1 = s[pos + 1];
    if (c1 == 's' || c1 == 'd' || c1 == 'm' || c1 == 't') return pos + 2;
    if (pos + 2 < n) {
      const unsigned char c2 = s[pos + 2];
      if ((c1 == 'l' && c2 == 'l') || (c1 == 'v' && c2 == 'e') || (c1 == 'r' && c2 == 'e')) return pos + 3;
    }
  }
  std::uint32_t len0 = 0;
  const CharClass k0 = class_at(s + pos, n - pos, len0);
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
  if (c0 == ' ' && pos + 1 < n) {
    std::uint32_t len1 = 0;
    const CharClass k1 = class_at(s + pos + 1, n - pos - 1, len1);
    if (k1 != CharClass::Space) return run_end(s, n, pos + 1 + len1, k1);
  }
  if (k0 != CharClass::Space) return run_end(s, n, pos + len0, k0);
  // `\s+(?!\S)`, `\s+`: a run of white space, less its last code point when something follows.
  std::size_t last = pos;
  std::size_t end = pos + len0;
  while (end < n) {
    std::uint32_t len = 0;
    if (class_at(s + end, n - end, len) != CharClass::Space) break;
    last = end;
    end += len;
  }
  if (end == n) return n;
  return last > pos ? last : end;
}

// ---------------------------------------------------------------- construction

BpeTokenizer::BpeTokenizer(std::vector<std::pair<std::string, Rank>> ranks,
                           std::vector<std::pair<std::string, Rank>> specials) {
  const char* op = "BpeTokenizer";
  const std::size_t total = ranks.size() + specials.size();
  std::uint64_t max_id = 0;
  for (const auto& r : ranks) max_id = std::max<std::uint64_t>(max_id, r.second);
  for (const auto& r : specials) max_id = std::max<std::uint64_t>(max_id, r.second);
  if (total == 0) fail(std::string(op) + ": the vocabulary is empty");
  // Ids index a table: gaps are allowed, but not a table much larger than the vocabulary.
  if (max_id >= 0x7FFFFFFFull || max_id > 2 * total + 1024)
    fail(std::string(op) + ": token id " + std::to_string(max_id) + " is far beyond the " + std::to_string(total) +
         " tokens of the vocabulary (ids must be below 2 * tokens + 1024)");
  id_bytes_.assign(max_id + 1, std::string());
  id_kind_.assign(max_id + 1, 0);
  std::size_t capacity = 16;
  while (capacity < 2 * ranks.size() + 2) capacity *= 2;
  table_.assign(capacity, Slot{0, kNoRank});
  mask_ = capacity - 1;
  for (auto& [bytes, rank] : ranks) {
    if (bytes.empty()) fail(std::string(op) + ": the token of rank " + std::to_string(rank) + " is empty");
    if (id_kind_[rank] != 0)
      fail(std::string(op) + ": rank " + std::to_string(rank) + " is given to both " + printable(id_bytes_[rank]) +
           " and " + printable(bytes));
    const std::uint64_t h = hash_bytes(bytes.data(), bytes.size());
    std::uint64_t i = h & mask_;
    while (table_[i].rank != kNoRank) {
      if (table_[i].hash == static_cast<std::uint32_t>(h >> 32) && id_bytes_[table_[i].rank] == bytes)
        fail(std::string(op) + ": the token " + printable(bytes) + " has two ranks, " +
             std::to_string(table_[i].rank) + " and " + std::to_string(rank));
      i = (i + 1) & mask_;
    }
    table_[i] = Slot{static_cast<std::uint32_t>(h >> 32), rank};
    id_bytes_[rank] = std::move(bytes);
    id_kind_[rank] = 1;
  }
  num_ranks_ = ranks.size();
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_rank_[b] = lookup(&c, 1);
    if (byte_rank_[b] == kNoRank)
      fail(std::string(op) + ": the byte " + printable(std::string_view(&c, 1)) +
           " has no rank (byte-level BPE needs all 256 bytes)");
  }
  for (auto& [text, id] : specials) {
    if (text.empty()) fail(std::string(op) + ": a special token is empty");
    if (id_kind_[id] != 0)
      fail(std::string(op) + ": the special token " + printable(text) + " has id " + std::to_string(id) +
           ", which " + printable(id_bytes_[id]) + " already has");
    for (const auto& s : specials_)
      if (s.first == text) fail(std::string(op) + ": the special token " + printable(text) + " is given twice");
    id_bytes_[id] = text;
    id_kind_[id] = 2;
    specials_.emplace_back(std::move(text), id);
  }
}

namespace {

bool base64_decode(std::string_view in, std::string& out) {
  auto value = [](unsigned char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (in.size() % 4 != 0 || in.empty()) return false;
  std::size_t pad = 0;
  if (in.back() == '=') pad = (in[in.size() - 2] == '=') ? 2 : 1;
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    for (int j = 0; j < 4; ++j) {
      const bool padding = i + 4 == in.size() && j >= 4 - static_cast<int>(pad);
      v[j] = padding ? 0 : value(static_cast<unsigned char>(in[i + j]));
      if (v[j] < 0) return false;
    }
    const std::uint32_t w = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>(w >> 16));
    if (!(i + 4 == in.size() && pad >= 2)) out.push_back(static_cast<char>((w >> 8) & 0xFF));
    if (!(i + 4 == in.size() && pad >= 1)) out.push_back(static_cast<char>(w & 0xFF));
  }
  return true;
}

std::string base64_encode(std::string_view in) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::uint32_t w = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) w |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) w |= static_cast<unsigned char>(in[i + 2]);
    out.push_back(table[w >> 18]);
    out.push_back(table[(w >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? table[(w >> 6) & 63] : '=');
    out.push_back(i + 2 < in.size() ? table[w & 63] : '=');
  }
  return out;
}

bool parse_rank(std::string_view s, Rank& out) {
  if (s.empty() || s.size() > 10) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v >= 0x7FFFFFFFull) return false;
  out = static_cast<Rank>(v);
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

}  // namespace

namespace {

std::vector<std::pair<std::string, Rank>> tiktoken_ranks(std::string_view contents, const std::string& source_name) {
  std::vector<std::pair<std::string, Rank>> ranks;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  std::string bytes;
  while (pos < contents.size()) {
    std::size_t eol = contents.find('\n', pos);
    if (eol == std::string_view::npos) eol = contents.size();
    const std::string_view line = trim(contents.substr(pos, eol - pos));
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    Rank rank = 0;
    if (space == std::string_view::npos || !base64_decode(line.substr(0, space), bytes) ||
        !parse_rank(trim(line.substr(space + 1)), rank)) {
      const std::string shown(line.substr(0, std::min<std::size_t>(line.size(), 60)));
      fail("BpeTokenizer.from_tiktoken: " + source_name + " line " + std::to_string(line_no) +
           ": expected 'base64-token rank', got '" + shown + "'");
    }
    ranks.emplace_back(bytes, rank);
  }
  return ranks;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tiktoken(std::string_view contents, std::vector<std::pair<std::string, Rank>> specials,
                                         const std::string& source_name) {
  return BpeTokenizer(tiktoken_ranks(contents, source_name), std::move(specials));
}

BpeTokenizer BpeTokenizer::from_tiktoken_gpt2_specials(std::string_view contents, const std::string& source_name) {
  constexpr Rank kGpt2EndOfText = 50256;
  std::vector<std::pair<std::string, Rank>> ranks = tiktoken_ranks(contents, source_name);
  Rank largest = 0;
  bool taken = false;
  for (const auto& [bytes, rank] : ranks) {
    largest = std::max(largest, rank);
    taken = taken || rank == kGpt2EndOfText;
  }
  // An empty file keeps its error (no byte has a rank) rather than one about the special.
  const Rank id = !taken && largest + 1 >= kGpt2EndOfText ? kGpt2EndOfText : largest + 1;
  std::vector<std::pair<std::string, Rank>> specials;
  specials.emplace_back("<|endoftext|>", id);
  return BpeTokenizer(std::move(ranks), std::move(specials));
}

namespace {

// GPT-2's byte-to-unicode alphabet: the printable bytes stand for themselves, the others for
// U+0100 onwards, in byte order. Ranks of the single bytes follow the same order.
std::vector<int> gpt2_byte_order(int (&byte_of_char)[0x144]) {
  auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  std::fill(std::begin(byte_of_char), std::end(byte_of_char), -1);
  std::vector<int> order;
  for (int b = 0; b < 256; ++b) {
    if (!printable(b)) continue;
    order.push_back(b);
    byte_of_char[b] = b;
  }
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (printable(b)) continue;
    order.push_back(b);
    byte_of_char[0x100 + n++] = b;
  }
  return order;
}

// A token in GPT-2's alphabet to its bytes; false if a character is outside the alphabet.
bool gpt2_token_bytes(std::string_view token, const int (&byte_of_char)[0x144], std::string& out) {
  out.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(token.data());
  std::size_t i = 0;
  while (i < token.size()) {
    const CodePoint c = decode(s + i, token.size() - i);
    if (c.cp >= 0x144 || byte_of_char[c.cp] < 0) return false;
    out.push_back(static_cast<char>(byte_of_char[c.cp]));
    i += c.len;
  }
  return !out.empty();
}

}  // namespace

BpeTokenizer BpeTokenizer::from_vocab_merges(const std::vector<std::pair<std::string, std::int64_t>>& vocab,
                                             std::string_view merges_text) {
  const char* op = "BpeTokenizer.from_vocab_merges";
  int byte_of_char[0x144];
  const std::vector<int> order = gpt2_byte_order(byte_of_char);
  std::unordered_map<std::string, Rank> ranks;
  std::vector<std::pair<std::string, Rank>> ranked;
  for (std::size_t i = 0; i < order.size(); ++i) {
    ranks.emplace(std::string(1, static_cast<char>(order[i])), static_cast<Rank>(i));
    ranked.emplace_back(std::string(1, static_cast<char>(order[i])), static_cast<Rank>(i));
  }
  std::size_t pos = 0, line_no = 0;
  std::string left, right;
  while (pos < merges_text.size()) {
    std::size_t eol = merges_text.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges_text.size();
    const std::string_view line = trim(merges_text.substr(pos, eol - pos));
    pos = eol + 1;
    ++line_no;
    if (line.empty() || line.starts_with("#version")) continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos ||
        !gpt2_token_bytes(line.substr(0, space), byte_of_char, left) ||
        !gpt2_token_bytes(line.substr(space + 1), byte_of_char, right))
      fail(std::string(op) + ": merges line " + std::to_string(line_no) +
           ": expected two tokens of GPT-2's byte alphabet separated by a space, got '" +
           std::string(line.substr(0, std::min<std::size_t>(line.size(), 60))) + "'");
    std::string merged = left + right;
    const Rank rank = static_cast<Rank>(ranked.size());
    if (!ranks.emplace(merged, rank).second)
      fail(std::string(op) + ": merges line " + std::to_string(line_no) + " makes " + printable(merged) +
           ", which an earlier line or a byte already makes");
    ranked.emplace_back(std::move(merged), rank);
  }
  std::vector<std::pair<std::string, Rank>> specials;
  std::vector<bool> seen(ranked.size(), false);
  std::string bytes;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id >= 0x7FFFFFFF)
      fail(std::string(op) + ": the id of '" + token + "' is " + std::to_string(id) + ", expected 0..2**31-2");
    auto it = gpt2_token_bytes(token, byte_of_char, bytes) ? ranks.find(bytes) : ranks.end();
    if (it == ranks.end()) {
      specials.emplace_back(token, static_cast<Rank>(id));
      continue;
    }
    if (static_cast<std::int64_t>(it->second) != id)
      fail(std::string(op) + ": the vocabulary gives '" + token + "' the id " + std::to_string(id) +
           ", but its place among the bytes and merges gives it " + std::to_string(it->second));
    seen[it->second] = true;
  }
  for (std::size_t r = 0; r < seen.size(); ++r)
    if (!seen[r])
      fail(std::string(op) + ": the vocabulary has no entry for " + printable(ranked[r].first) + " (rank " +
           std::to_string(r) + ")");
  return BpeTokenizer(std::move(ranked), std::move(specials));
}

std::string BpeTokenizer::to_tiktoken() const {
  std::string out;
  for (std::size_t id = 0; id < id_bytes_.size(); ++id) {
    if (id_kind_[id] != 1) continue;
    out += base64_encode(id_bytes_[id]);
    out += ' ';
    out += std::to_string(id);
    out += '\n';
  }
  return out;
}

// ---------------------------------------------------------------- encoding

Rank BpeTokenizer::lookup(const char* data, std::size_t size) const noexcept {
  const std::uint64_t h = hash_bytes(data, size);
  const auto tag = static_cast<std::uint32_t>(h >> 32);
  for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = table_[i];
    if (slot.rank == kNoRank) return kNoRank;
    if (slot.hash == tag) {
      const std::string& t = id_bytes_[slot.rank];
      if (t.size() == size && std::memcmp(t.data(), data, size) == 0) return slot.rank;
    }
  }
}

// tiktoken's merge loop: parts[i] is the start of part i and the rank of part i + part i+1.
void BpeTokenizer::merge_small(const char* data, std::size_t size, std::vector<Rank>& out) const {
  struct Part {
    std::uint32_t start;
    Rank rank;
  };
  Part parts[kSmallPiece + 1];
  std::size_t n = size + 1;
  for (std::size_t i = 0; i + 1 < size; ++i) parts[i] = {static_cast<std::uint32_t>(i), lookup(data + i, 2)};
  parts[size - 1] = {static_cast<std::uint32_t>(size - 1), kNoRank};
  parts[size] = {static_cast<std::uint32_t>(size), kNoRank};
  auto pair_rank = [&](std::size_t i) {
    return i + 3 < n ? lookup(data + parts[i].start, parts[i + 3].start - parts[i].start) : kNoRank;
  };
  for (;;) {
    Rank min_rank = kNoRank;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (parts[i].rank < min_rank) {
        min_rank = parts[i].rank;
        at = i;
      }
    }
    if (min_rank == kNoRank) break;
    if (at > 0) parts[at - 1].rank = pair_rank(at - 1);
    parts[at].rank = pair_rank(at);
    std::memmove(&parts[at + 1], &parts[at + 2], (n - at - 2) * sizeof(Part));
    --n;
  }
  for (std::size_t i = 0; i + 1 < n; ++i) out.push_back(lookup(data + parts[i].start, parts[i + 1].start - parts[i].start));
}

// The same merges in O(n log n) for long pieces: a linked list of parts and a heap of
// (rank, start) pairs; an entry is stale when its part is gone or its pair changed (the bytes of
// a part's pair only grow, and ranks of distinct bytes differ).
void BpeTokenizer::merge_large(const char* data, std::size_t size, std::vector<Rank>& out) const {
  const auto n = static_cast<std::uint32_t>(size);
  std::vector<std::uint32_t> next(n), prev(n);
  std::vector<Rank> pair(n, kNoRank), token(n);
  std::vector<std::uint8_t> alive(n, 1);
  using Entry = std::uint64_t;  // rank << 32 | start: smallest rank, then leftmost
  std::vector<Entry> heap;
  heap.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1;
    prev[i] = i == 0 ? n : i - 1;
    token[i] = byte_rank_[static_cast<unsigned char>(data[i])];
    if (i + 1 < n) {
      pair[i] = lookup(data + i, 2);
      if (pair[i] != kNoRank) heap.push_back((static_cast<Entry>(pair[i]) << 32) | i);
    }
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  auto set_pair = [&](std::uint32_t i) {
    const std::uint32_t j = next[i];
    if (j >= n) {
      pair[i] = kNoRank;
      return;
    }
    const std::uint32_t end = next[j];
    pair[i] = lookup(data + i, end - i);
    if (pair[i] != kNoRank) {
      heap.push_back((static_cast<Entry>(pair[i]) << 32) | i);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Entry e = heap.back();
    heap.pop_back();
    const auto i = static_cast<std::uint32_t>(e & 0xFFFFFFFFu);
    const auto rank = static_cast<Rank>(e >> 32);
    if (!alive[i] || pair[i] != rank) continue;
    const std::uint32_t j = next[i];
    alive[j] = 0;
    token[i] = rank;
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = i;
    set_pair(i);
    if (prev[i] < n) set_pair(prev[i]);
  }
  for (std::uint32_t i = 0; i < n; i = next[i]) out.push_back(token[i]);
}

void BpeTokenizer::encode_piece(const char* data, std::size_t size, std::vector<Rank>& out) const {
  if (size == 1) {
    out.push_back(byte_rank_[static_cast<unsigned char>(data[0])]);
    return;
  }
  const Rank whole = lookup(data, size);
  if (whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (size <= kSmallPiece) {
    merge_small(data, size, out);
  } else {
    merge_large(data, size, out);
  }
}

void BpeTokenizer::encode_ordinary_into(std::string_view text, std::vector<Rank>& out) const {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = gpt2_piece_end(text, pos);
    encode_piece(text.data() + pos, end - pos, out);
    pos = end;
  }
}

std::vector<Rank> BpeTokenizer::encode_ordinary(std::string_view text) const {
  std::vector<Rank> out;
  out.reserve(text.size() / 3 + 4);
  encode_ordinary_into(text, out);
  return out;
}

std::vector<Rank> BpeTokenizer::encode(std::string_view text, const std::vector<bool>& allowed) const {
  KAEL_INTERNAL_ASSERT(allowed.size() == specials_.size());
  std::vector<Rank> out;
  out.reserve(text.size() / 3 + 4);
  std::vector<std::size_t> next_at(specials_.size(), 0);  // cached next occurrence, npos: none
  std::vector<bool> known(specials_.size(), false);
  std::size_t pos = 0;
  for (;;) {
    // The leftmost allowed special from pos (the longest where several start there).
    std::size_t best = std::string_view::npos, best_len = 0, best_id = 0;
    for (std::size_t k = 0; k < specials_.size(); ++k) {
      if (!allowed[k]) continue;
      if (!known[k] || (next_at[k] != std::string_view::npos && next_at[k] < pos)) {
        next_at[k] = text.find(specials_[k].first, pos);
        known[k] = true;
      }
      const std::size_t at = next_at[k];
      const std::size_t len = specials_[k].first.size();
      if (at != std::string_view::npos && (at < best || (at == best && len > best_len))) {
        best = at;
        best_len = len;
        best_id = specials_[k].second;
      }
    }
    const std::size_t end = best == std::string_view::npos ? text.size() : best;
    encode_ordinary_into(text.substr(pos, end - pos), out);
    if (best == std::string_view::npos) break;
    out.push_back(static_cast<Rank>(best_id));
    pos = best + best_len;
  }
  return out;
}

std::ptrdiff_t BpeTokenizer::find_special(std::string_view text, const std::vector<bool>& which) const {
  std::size_t best = std::string_view::npos;
  std::ptrdiff_t found = -1;
  for (std::size_t k = 0; k < specials_.size(); ++k) {
    if (!which[k]) continue;
    const std::size_t at = text.find(specials_[k].first);
    if (at != std::string_view::npos && (at < best || (at == best && specials_[k].first.size() >
                                                                          specials_[static_cast<std::size_t>(found)].first.size()))) {
      best = at;
      found = static_cast<std::ptrdiff_t>(k);
    }
  }
  return found;
}

// ---------------------------------------------------------------- decoding and lookups

const std::string& BpeTokenizer::token_bytes(std::int64_t id, const char* op) const {
  if (id < 0 || static_cast<std::uint64_t>(id) >= id_bytes_.size())
    fail(std::string(op) + ": token id " + std::to_string(id) + " is out of range for a vocabulary of " +
         std::to_string(id_bytes_.size()) + " tokens");
  if (id_kind_[static_cast<std::size_t>(id)] == 0)
    fail(std::string(op) + ": token id " + std::to_string(id) + " is not a token of this vocabulary (a gap in its ids)");
  return id_bytes_[static_cast<std::size_t>(id)];
}

std::string BpeTokenizer::decode_bytes(const std::vector<std::int64_t>& ids, const char* op) const {
  std::size_t total = 0;
  for (std::int64_t id : ids) total += token_bytes(id, op).size();  // every check before the first write
  std::string out;
  out.reserve(total);
  for (std::int64_t id : ids) out += id_bytes_[static_cast<std::size_t>(id)];
  return out;
}

std::int64_t BpeTokenizer::token_id(std::string_view bytes) const {
  if (!bytes.empty()) {
    const Rank r = lookup(bytes.data(), bytes.size());
    if (r != kNoRank) return r;
  }
  for (const auto& s : specials_)
    if (s.first == bytes) return s.second;
  return -1;
}

}  // namespace kael::text
