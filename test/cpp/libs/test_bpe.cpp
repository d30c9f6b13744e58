// The GPT-2 pre-tokeniser, the merge loops and training of kael/text/bpe.h.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "kael/core/error.h"
#include "kael/text/bpe.h"

using kael::text::BpeTokenizer;
using kael::text::BpeTrainer;
using kael::text::CharClass;
using kael::text::Rank;

namespace {

std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = kael::text::gpt2_piece_end(text, pos);
    EXPECT_GT(end, pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// The 256 bytes as ranks 0..255 plus the given merges (as byte strings), ranked in order.
std::vector<std::pair<std::string, Rank>> byte_ranks(const std::vector<std::string>& merges) {
  std::vector<std::pair<std::string, Rank>> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(std::string(1, static_cast<char>(b)), static_cast<Rank>(b));
  for (const auto& m : merges) ranks.emplace_back(m, static_cast<Rank>(ranks.size()));
  return ranks;
}

// tiktoken's merge loop, written plainly: the lowest-ranked adjacent pair merges, leftmost first.
std::vector<Rank> reference_bpe(const std::string& piece, const std::map<std::string, Rank>& ranks) {
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    Rank best = 0xFFFFFFFFu;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == 0xFFFFFFFFu) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<Rank> out;
  for (const auto& p : parts) out.push_back(ranks.at(p));
  return out;
}

}  // namespace

TEST(BpePretokenizer, Gpt2Pieces) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(pieces("I'm don't we'll they've you're he'd"),
            (V{"I", "'m", " don", "'t", " we", "'ll", " they", "'ve", " you", "'re", " he", "'d"}));
  EXPECT_EQ(pieces("'S 's''s"), (V{"'", "S", " '", "s", "''", "s"}));
  EXPECT_EQ(pieces("abc123 456!!  x"), (V{"abc", "123", " 456", "!!", " ", " x"}));
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces("end   "), (V{"end", "   "}));
  EXPECT_EQ(pieces(" \n x"), (V{" \n", " x"}));
  // Unicode classes: letters (Greek, CJK), numbers (Arabic-Indic digits, Roman numeral), marks.
  EXPECT_EQ(pieces("αβγ ١٢٣ Ⅻ 漢字"), (V{"αβγ", " ١٢٣", " Ⅻ", " 漢字"}));
  EXPECT_EQ(pieces("e\xCC\x81t\xC3\xA9"), (V{"e", "\xCC\x81", "t\xC3\xA9"}));  // a combining mark is not \p{L}
  EXPECT_EQ(pieces("a\xC2\xA0" "b"), (V{"a", "\xC2\xA0", "b"}));               // U+00A0 is \s
  EXPECT_EQ(pieces("a\x1c" "b"), (V{"a", "\x1c", "b"}));                          // U+001C is not \s
  EXPECT_EQ(pieces("\xFF\xFEx"), (V{"\xFF\xFE", "x"}));  // invalid bytes: class Other, one each
}

TEST(BpePretokenizer, ClassesComeFromTheTables) {
  EXPECT_EQ(kael::text::char_class('a'), CharClass::Letter);
  EXPECT_EQ(kael::text::char_class(0x4E00), CharClass::Letter);
  EXPECT_EQ(kael::text::char_class('7'), CharClass::Number);
  EXPECT_EQ(kael::text::char_class(0x2167), CharClass::Number);  // Roman numeral eight (Nl)
  EXPECT_EQ(kael::text::char_class(0x3000), CharClass::Space);
  EXPECT_EQ(kael::text::char_class(0x1F600), CharClass::Other);  // an emoji
  EXPECT_EQ(kael::text::char_class(0x110000), CharClass::Other);
  EXPECT_NE(std::string(kael::text::unicode_version()), "");
}

TEST(BpeTokenizer, MergesMatchTheReferenceOnShortAndLongPieces) {
  // Merges over {a, b, c, !}: long runs of '!' are single pieces longer than the small-piece
  // limit, so both merge loops run.
  const std::vector<std::string> merges = {"ab", "!!", "abc", "ca", "!!!!", "aa", "bb", "cc", "aaa", "!!!", "ba", "bab"};
  const auto ranks = byte_ranks(merges);
  std::map<std::string, Rank> map(ranks.begin(), ranks.end());
  BpeTokenizer tok(ranks, {});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng() % (trial % 2 ? 300 : 40);
    std::string letters, bangs;
    for (std::size_t i = 0; i < n; ++i) letters.push_back("abc"[rng() % 3]);
    for (std::size_t i = 0; i < n; ++i) bangs.push_back('!');
    EXPECT_EQ(tok.encode_ordinary(letters), reference_bpe(letters, map)) << letters;
    EXPECT_EQ(tok.encode_ordinary(bangs), reference_bpe(bangs, map)) << n;
  }
}

TEST(BpeTokenizer, SpecialsAndDecoding) {
  auto ranks = byte_ranks({"ab"});
  BpeTokenizer tok(ranks, {{"<|end|>", 300}});
  EXPECT_EQ(tok.vocab_size(), 301u);
  const std::vector<bool> allowed = {true}, none = {false};
  EXPECT_EQ(tok.encode("ab<|end|>a", allowed), (std::vector<Rank>{256, 300, 'a'}));
  EXPECT_EQ(tok.encode("ab<|end|>", none).size(), 8u);  // as text
  EXPECT_EQ(tok.find_special("x<|end|>", allowed), 0);
  EXPECT_EQ(tok.find_special("x<|end", allowed), -1);
  EXPECT_EQ(tok.decode_bytes({256, 300, 'a'}, "decode"), "ab<|end|>a");
  EXPECT_THROW(tok.decode_bytes({301}, "decode"), kael::ValueError);
  EXPECT_THROW(tok.decode_bytes({-1}, "decode"), kael::ValueError);
  EXPECT_THROW(tok.decode_bytes({280}, "decode"), kael::ValueError);  // a gap
  EXPECT_EQ(tok.token_id("ab"), 256);
  EXPECT_EQ(tok.token_id("<|end|>"), 300);
  EXPECT_EQ(tok.token_id("abc"), -1);
}

TEST(BpeTokenizer, RejectsBadVocabularies) {
  auto ranks = byte_ranks({"ab"});
  auto dup = ranks;
  dup.emplace_back("ab", 300);
  EXPECT_THROW(BpeTokenizer(dup, {}), kael::ValueError);
  auto missing = ranks;
  missing.erase(missing.begin() + 7);
  EXPECT_THROW(BpeTokenizer(missing, {}), kael::ValueError);
  EXPECT_THROW(BpeTokenizer(ranks, {{"<s>", 256}}), kael::ValueError);          // taken id
  EXPECT_THROW(BpeTokenizer(ranks, {{"<s>", 1u << 30}}), kael::ValueError);     // huge gap
  EXPECT_THROW(BpeTokenizer::from_tiktoken("YQ== 0\nnot-base64 1\n", {}, "f"), kael::ValueError);
}

TEST(BpeTokenizer, TiktokenFormatRoundTrips) {
  BpeTokenizer tok(byte_ranks({"ab", "abc", " x"}), {});
  const std::string saved = tok.to_tiktoken();
  BpeTokenizer back = BpeTokenizer::from_tiktoken(saved, {}, "saved");
  EXPECT_EQ(back.to_tiktoken(), saved);
  EXPECT_EQ(back.encode_ordinary("abc x"), (std::vector<Rank>{257, 258}));
}

TEST(BpeTrainer, LearnsFrequentPairsDeterministically) {
  BpeTrainer trainer({"<|eot|>"});
  trainer.add_text("low lower lowest<|eot|>low low newer wider");
  const BpeTokenizer a = trainer.train(270);
  const BpeTokenizer b = trainer.train(270);
  EXPECT_EQ(a.to_tiktoken(), b.to_tiktoken());
  EXPECT_EQ(a.vocab_size(), 270u);
  EXPECT_EQ(a.specials().at(0).second, 269u);
  // The first merge is the most frequent pair, ("l", "o") and ("o", "w") tie at 5: the smaller ids win.
  EXPECT_EQ(a.token_bytes(256, "t"), "lo");
  const std::string text = "lowest newer<|eot|>";
  std::vector<std::int64_t> ids;
  for (Rank r : a.encode(text, {true})) ids.push_back(r);
  EXPECT_EQ(a.decode_bytes(ids, "t"), text);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_THROW(trainer.train(256), kael::ValueError);  // no room for the special token
}
