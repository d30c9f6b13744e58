// Byte-level BPE training (Note [BPE tokenizer] in kael/text/bpe.h).
#include <algorithm>
#include <queue>
#include <unordered_map>

#include "kael/core/error.h"
#include "kael/text/bpe.h"

namespace kael::text {

std::size_t BpeTrainer::Hash::operator()(std::string_view s) const noexcept {
  return std::hash<std::string_view>()(s);
}

BpeTrainer::BpeTrainer(std::vector<std::string> special_tokens) : specials_(std::move(special_tokens)) {
  for (std::size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i].empty()) throw ValueError("BpeTokenizer.train: a special token is empty");
    for (std::size_t j = 0; j < i; ++j)
      if (specials_[j] == specials_[i])
        throw ValueError("BpeTokenizer.train: the special token '" + specials_[i] + "' is given twice");
  }
}

void BpeTrainer::add_text(std::string_view text) {
  auto count_words = [this](std::string_view part) {
    std::size_t pos = 0;
    while (pos < part.size()) {
      const std::size_t end = gpt2_piece_end(part, pos);
      const std::string_view word = part.substr(pos, end - pos);
      auto it = words_.find(word);
      if (it == words_.end()) {
        words_.emplace(std::string(word), 1);
      } else {
        ++it->second;
      }
      pos = end;
    }
  };
  // The special tokens' texts separate the text and are not learnt from.
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t best = std::string_view::npos, best_len = 0;
    for (const std::string& s : specials_) {
      const std::size_t at = text.find(s, pos);
      if (at != std::string_view::npos && (at < best || (at == best && s.size() > best_len))) {
        best = at;
        best_len = s.size();
      }
    }
    const std::size_t end = best == std::string_view::npos ? text.size() : best;
    count_words(text.substr(pos, end - pos));
    if (best == std::string_view::npos) break;
    pos = best + best_len;
  }
}

namespace {

using Pair = std::uint64_t;  // left << 32 | right
inline Pair make_pair(Rank a, Rank b) { return (static_cast<Pair>(a) << 32) | b; }

struct Candidate {
  std::int64_t count;
  Pair pair;
  // The priority queue's top is the largest: the highest count, then the smallest pair.
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

}  // namespace

BpeTokenizer BpeTrainer::train(std::size_t vocab_size) const {
  if (vocab_size < 256 + specials_.size() || vocab_size > 0x7FFFFFF0u)
    throw ValueError("BpeTokenizer.train: vocab_size must be at least 256 + the number of special tokens (" +
                     std::to_string(256 + specials_.size()) + ") and below 2**31, got " + std::to_string(vocab_size));
  const std::size_t target = vocab_size - specials_.size();

  std::vector<std::string> tokens;
  std::unordered_map<std::string, Rank> token_ids;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(1, static_cast<char>(b));
    token_ids.emplace(tokens.back(), static_cast<Rank>(b));
  }

  // Words in a fixed order (by their bytes), so that everything below is deterministic.
  std::vector<std::pair<std::string_view, std::int64_t>> sorted;
  sorted.reserve(words_.size());
  for (const auto& [w, c] : words_) sorted.emplace_back(w, c);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<Rank>> words(sorted.size());
  std::vector<std::int64_t> counts(sorted.size());
  for (std::size_t w = 0; w < sorted.size(); ++w) {
    for (unsigned char c : sorted[w].first) words[w].push_back(c);
    counts[w] = sorted[w].second;
  }

  std::unordered_map<Pair, std::int64_t> pair_count;
  std::unordered_map<Pair, std::vector<std::uint32_t>> where;  // words a pair occurs in (maybe stale)
  for (std::size_t w = 0; w < words.size(); ++w) {
    for (std::size_t i = 0; i + 1 < words[w].size(); ++i) {
      const Pair p = make_pair(words[w][i], words[w][i + 1]);
      pair_count[p] += counts[w];
      auto& list = where[p];
      if (list.empty() || list.back() != w) list.push_back(static_cast<std::uint32_t>(w));
    }
  }
  std::priority_queue<Candidate> queue;
  for (const auto& [p, c] : pair_count) queue.push({c, p});

  std::vector<std::size_t> seen_at(words.size(), 0);  // the merge that last rewrote each word
  std::vector<Pair> raised;
  std::vector<Rank> rewritten;
  std::size_t merge_no = 0;
  while (tokens.size() < target && !queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const auto it = pair_count.find(top.pair);
    const std::int64_t current = it == pair_count.end() ? 0 : it->second;
    if (current != top.count) {  // stale: requeue with its present count
      if (current > 0) queue.push({current, top.pair});
      continue;
    }
    if (current <= 0) continue;
    ++merge_no;
    const Rank a = static_cast<Rank>(top.pair >> 32), b = static_cast<Rank>(top.pair & 0xFFFFFFFFu);
    std::string merged = tokens[a] + tokens[b];
    Rank c;
    if (auto found = token_ids.find(merged); found != token_ids.end()) {
      c = found->second;  // already a token (reached through another pair): no new rank
    } else {
      c = static_cast<Rank>(tokens.size());
      token_ids.emplace(merged, c);
      tokens.push_back(std::move(merged));
    }
    auto add = [&](Pair p, std::int64_t delta, std::uint32_t w) {
      std::int64_t& n = pair_count[p];
      n += delta;
      if (delta > 0) {
        auto& list = where[p];
        if (list.empty() || list.back() != w) list.push_back(w);
        raised.push_back(p);
      }
    };
    std::vector<std::uint32_t> occurrences = std::move(where[top.pair]);
    where.erase(top.pair);
    raised.clear();
    for (const std::uint32_t w : occurrences) {
      if (seen_at[w] == merge_no) continue;
      seen_at[w] = merge_no;
      const std::vector<Rank>& sym = words[w];
      const std::int64_t n = counts[w];
      rewritten.clear();
      std::size_t j = 0;
      while (j < sym.size()) {
        if (j + 1 < sym.size() && sym[j] == a && sym[j + 1] == b) {
          if (!rewritten.empty()) {
            add(make_pair(rewritten.back(), a), -n, w);
            add(make_pair(rewritten.back(), c), n, w);
          }
          if (j + 2 < sym.size()) {
            add(make_pair(b, sym[j + 2]), -n, w);
            add(make_pair(c, sym[j + 2]), n, w);
          }
          add(top.pair, -n, w);
          rewritten.push_back(c);
          j += 2;
        } else {
          rewritten.push_back(sym[j]);
          ++j;
        }
      }
      words[w] = rewritten;
    }
    pair_count.erase(top.pair);
    std::sort(raised.begin(), raised.end());
    raised.erase(std::unique(raised.begin(), raised.end()), raised.end());
    for (const Pair p : raised) {
      const auto found = pair_count.find(p);
      if (found != pair_count.end() && found->second > 0) queue.push({found->second, p});
    }
  }

  std::vector<std::pair<std::string, Rank>> ranks;
  ranks.reserve(tokens.size());
  for (std::size_t r = 0; r < tokens.size(); ++r) ranks.emplace_back(std::move(tokens[r]), static_cast<Rank>(r));
  std::vector<std::pair<std::string, Rank>> specials;
  for (std::size_t i = 0; i < specials_.size(); ++i)
    specials.emplace_back(specials_[i], static_cast<Rank>(ranks.size() + i));
  return BpeTokenizer(std::move(ranks), std::move(specials));
}

}  // namespace kael::text
