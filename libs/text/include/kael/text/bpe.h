#pragma once
// Byte-level BPE as GPT-2's tokenizer and tiktoken encode it (Note [BPE tokenizer]).
//
// Note [BPE tokenizer]
// Text is UTF-8. Encoding splits it at the special tokens that are allowed, cuts each stretch
// between them into pieces with GPT-2's pre-tokenisation pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (matched by hand in text/bpe.cpp; the Unicode classes come from tables generated at build time,
// kael/text/unicode_tables.h), and turns each piece into tokens: a piece that is a token is one
// token; otherwise its bytes start as one part each and the adjacent pair whose concatenation has
// the lowest rank merges, the leftmost on ties, until no adjacent pair is a token. Ranks are the
// token ids, as in tiktoken's files. The tokenizer is immutable once built, so any number of
// threads encode and decode with it at once.
//
// Training (BpeTrainer) counts the pre-tokenised words of a corpus, then merges the most frequent
// adjacent pair repeatedly; pair counts and the words each pair occurs in are updated
// incrementally per merge (never recounted), ties go to the pair with the smallest (left, right)
// ids, and a pair whose concatenation already is a token merges into that token without adding one.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kael::text {

using Rank = std::uint32_t;

// Code point classes of the GPT-2 pattern.
enum class CharClass : std::uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

CharClass char_class(std::uint32_t code_point) noexcept;
// The Unicode version of the class tables (that of the Python that generated them).
const char* unicode_version() noexcept;

// The end of the GPT-2 pre-tokenisation piece that starts at `pos` (< text.size()). Invalid UTF-8
// bytes count as one code point of class Other each.
std::size_t gpt2_piece_end(std::string_view text, std::size_t pos) noexcept;

// The pattern strings accepted as GPT-2's (tiktoken's spelling of it, and the original one).
bool is_gpt2_pattern(std::string_view pattern) noexcept;
extern const char* const kGpt2Pattern;

class BpeTokenizer {
 public:
  // ranks: token bytes -> rank (= id); every one of the 256 bytes must have one. specials: text ->
  // id, ids distinct from the ranks. Throws ValueError on duplicates and gaps in the byte ranks.
  BpeTokenizer(std::vector<std::pair<std::string, Rank>> ranks, std::vector<std::pair<std::string, Rank>> specials);

  // tiktoken's file format: one "base64(token) rank" per line.
  static BpeTokenizer from_tiktoken(std::string_view file_contents, std::vector<std::pair<std::string, Rank>> specials,
                                    const std::string& source_name);
  // The same file with GPT-2's special token, "<|endoftext|>", where the file says nothing of its
  // specials: id 50256 where the ranks reach 50255 and leave 50256 free (GPT-2's file, p50k's),
  // else the id after the largest rank (what BpeTrainer gives a vocabulary's one special).
  static BpeTokenizer from_tiktoken_gpt2_specials(std::string_view file_contents, const std::string& source_name);
  // GPT-2's encoder.json (already parsed: token string -> id) and vocab.bpe / merges.txt text. The
  // tokens are in GPT-2's byte-to-unicode alphabet; ranks are assigned as tiktoken does (the 256
  // bytes, then one per merge in file order) and must equal the ids of the vocabulary; vocabulary
  // entries that are neither a byte nor a merge become special tokens.
  static BpeTokenizer from_vocab_merges(const std::vector<std::pair<std::string, std::int64_t>>& vocab,
                                        std::string_view merges_text);

  // Encodes text. allowed[i] refers to specials()[i]: an allowed special's text becomes its id,
  // the text of any other is encoded as ordinary text (tiktoken's disallowed_special check is
  // find_special, run first by the caller).
  std::vector<Rank> encode(std::string_view text, const std::vector<bool>& allowed) const;
  // The index in specials() of the leftmost special whose `which` is set that occurs in text, or -1.
  std::ptrdiff_t find_special(std::string_view text, const std::vector<bool>& which) const;
  std::vector<Rank> encode_ordinary(std::string_view text) const;
  void encode_ordinary_into(std::string_view text, std::vector<Rank>& out) const;

  // The bytes of the ids; an id that is not a token throws ValueError naming it (`op` first).
  std::string decode_bytes(const std::vector<std::int64_t>& ids, const char* op) const;
  const std::string& token_bytes(std::int64_t id, const char* op) const;
  // The id of a token's bytes (a mergeable token or a special's text), or -1.
  std::int64_t token_id(std::string_view bytes) const;

  // One more than the largest id.
  std::size_t vocab_size() const noexcept { return id_bytes_.size(); }
  std::size_t num_ranks() const noexcept { return num_ranks_; }
  const std::vector<std::pair<std::string, Rank>>& specials() const noexcept { return specials_; }

  // tiktoken's file format, ordered by rank (specials are not part of that format: kael.BpeTokenizer.save
  // writes them beside it).
  std::string to_tiktoken() const;

 private:
  Rank lookup(const char* data, std::size_t size) const noexcept;  // kNoRank when absent
  void encode_piece(const char* data, std::size_t size, std::vector<Rank>& out) const;
  void merge_small(const char* data, std::size_t size, std::vector<Rank>& out) const;
  void merge_large(const char* data, std::size_t size, std::vector<Rank>& out) const;

  static constexpr Rank kNoRank = 0xFFFFFFFFu;
  struct Slot {
    std::uint32_t hash;
    Rank rank;  // kNoRank: empty
  };
  std::vector<Slot> table_;      // open addressing over the mergeable tokens
  std::uint64_t mask_ = 0;
  std::vector<std::string> id_bytes_;  // by id; empty string: no token has that id
  std::vector<std::uint8_t> id_kind_;  // 0 none, 1 mergeable, 2 special
  Rank byte_rank_[256] = {};
  std::size_t num_ranks_ = 0;
  std::vector<std::pair<std::string, Rank>> specials_;
};

// Byte-level BPE training over GPT-2's pre-tokenisation (Note [BPE tokenizer]).
class BpeTrainer {
 public:
  explicit BpeTrainer(std::vector<std::string> special_tokens);
  // Counts the words of one text; the special tokens' texts are cut out first.
  void add_text(std::string_view text);
  // Learns merges until there are vocab_size tokens (the 256 bytes, the merges, then the special
  // tokens) or no pair is left. Throws ValueError if vocab_size < 256 + number of specials.
  BpeTokenizer train(std::size_t vocab_size) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept;
  };
  std::vector<std::string> specials_;
  std::unordered_map<std::string, std::int64_t, Hash, std::equal_to<>> words_;
};

}  // namespace kael::text
