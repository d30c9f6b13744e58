#pragma once
// Note [GPT]
// ~~~~~~~~~~
// kael's GPT-2: the architecture of Hugging Face's GPT2LMHeadModel (token and position
// embeddings, n_layer pre-LayerNorm blocks of causal self-attention and a tanh-GELU MLP, a final
// LayerNorm, the LM head tied to the token embedding), written in C++ on the core's C++ API.
//
// The parameters are not owned here. kael.GPT (kael/models/gpt.py) is a kael.nn.Module whose
// Parameters carry Hugging Face's names; each call hands them over in the order of
// parameter_names(), and Weights::from_list checks them. So the optimizers, state_dict(),
// model.to(dtype) and clip_grad_norm_ see ordinary Parameters, and forward() records autograd
// through the dispatcher like any other op.
//
// Generation runs on a Decoder: a fixed number of sequence slots, each with its own KV cache,
// sampling settings and random stream. A step prefills the sequences added since the last step
// and then samples one token for every active sequence, with the weight-bound products batched
// over the sequences; sequences join and leave between steps. generate() (Python's
// GPT.generate) and the server's continuous batching both drive it.

#include <cstdint>
#include <optional>
#include <limits>
#include <string>
#include <vector>

#include "kael/core/tensor.h"

namespace kael::gpt {

struct Config {
  std::int64_t vocab_size = 50257;
  std::int64_t block_size = 1024;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;
  double layer_norm_epsilon = 1e-5;

  // ValueError naming the value: a size below 1, n_embd not a multiple of n_head, dropout
  // outside [0, 1), a non-positive or non-finite epsilon.
  void validate() const;
  std::int64_t head_dim() const { return n_embd / n_head; }
};

// One block's parameters as Hugging Face names them (transformer.h.<i>.*). The projections are
// in Hugging Face's Conv1D layout, (in_features, out_features): y = x @ weight + bias. Biases
// are undefined tensors when the config has bias=false.
struct Block {
  Tensor ln_1_weight, ln_1_bias;                // (C,), (C,)
  Tensor attn_c_attn_weight, attn_c_attn_bias;  // (C, 3C), (3C,)
  Tensor attn_c_proj_weight, attn_c_proj_bias;  // (C, C), (C,)
  Tensor ln_2_weight, ln_2_bias;                // (C,), (C,)
  Tensor mlp_c_fc_weight, mlp_c_fc_bias;        // (C, 4C), (4C,)
  Tensor mlp_c_proj_weight, mlp_c_proj_bias;    // (4C, C), (C,)
};

struct Weights {
  Tensor wte;  // (vocab_size, C); the LM head is tied to it: logits = x @ wte^T
  Tensor wpe;  // (block_size, C)
  std::vector<Block> h;
  Tensor ln_f_weight, ln_f_bias;

  // From the parameters in the order of parameter_names(config). ValueError naming the
  // parameter when one is missing, extra, of the wrong shape, not floating point, or of another
  // dtype or device than wte.
  static Weights from_list(const Config& config, const std::vector<Tensor>& params);
  ScalarType dtype() const { return wte.dtype(); }
};

// Hugging Face's names of the parameters (GPT2LMHeadModel.named_parameters(), whose lm_head is
// the tied wte), in the order from_list takes them, and their shapes.
std::vector<std::string> parameter_names(const Config& config);
std::vector<std::vector<std::int64_t>> parameter_shapes(const Config& config);

// ---------------------------------------------------------------- forward (training)
struct Output {
  Tensor logits;  // (B, T, vocab_size)
  Tensor loss;    // mean cross-entropy over the targets that are not -100; undefined without targets
};

// idx: (B, T) int64 with 1 <= T <= block_size and every id in [0, vocab_size). `training` turns
// dropout on (the default generator draws its masks). Autograd records the graph when grad mode
// is on and a weight requires grad.
Output forward(const Config& config, const Weights& weights, const Tensor& idx,
               const std::optional<Tensor>& targets, bool training);

// ---------------------------------------------------------------- generation
// How a sequence's tokens are drawn (Note [Sampling] in libs/gpt/src/decoder.cpp): the logits
// divided by the temperature, cut to the top_k, then to the top_p nucleus (transformers'
// warpers, in that order), then one draw from the sequence's own Philox stream (seed, stream):
// its n-th token uses block n of it, so the tokens depend on nothing else.
struct Sampling {
  double temperature = 1.0;           // 0: greedy (argmax, the lowest id on ties)
  std::optional<std::int64_t> top_k;  // keep the k most likely tokens
  std::optional<double> top_p;        // keep the smallest set whose probability reaches p, in (0, 1]
  std::uint64_t seed = 0;             // the sequence's own random stream: its key ...
  std::uint64_t stream = 0;           // ... and its stream (generate: the row)
  // ValueError naming the value: negative or NaN temperature, top_k < 1, top_p outside (0, 1].
  void validate() const;
};

// Note [Decoder]
// Each slot holds a sequence: its tokens, its KV cache (float32, (n_layer, 2, n_head, length,
// head_dim), allocated when the sequence is added for the tokens it can reach, at most
// block_size, and kept for the slot's next sequence), its Sampling and stop tokens. A step runs
// tokens not yet in a cache (the last token of every running sequence, and prompt tokens of new
// sequences up to step's row budget, in forward passes of at most kChunkRows) as rows of one
// forward pass, so the weight-bound products read the weights once for all active sequences;
// a server passes a small budget so that a long prompt does not stall the running streams, and
// generate() none. Attention runs per row over its own cache; only rows whose
// logits are wanted (the last of each sequence) get the final LayerNorm and the LM head. A
// sequence's logits are bit-identical whether it runs alone or batched, at any thread count
// (Note [Small-M products] in aten/src/native/cpu/gemm_small_m.cpp).
// A context longer than block_size is cropped to its last block_size tokens, as nanoGPT's
// generate crops idx: the cache is then recomputed from that window, positions from 0, at
// every further step (nanoGPT's semantics, one full forward per token from there on).
// Computes in float32 whatever the weights' dtype (float32, bfloat16 and float16 weights are
// read as they are; others are converted once); no autograd.
// The Decoder holds its own views of the weights' memory, pinned (Note [Concurrency] in
// kael/core/concurrency.h): construct and destroy it with the caller's lock held; step() may
// then run without it. One thread at a time per Decoder.
class Decoder {
 public:
  // Prompt tokens one forward pass takes at most (longer prompts are prefilled in chunks).
  static constexpr std::int64_t kChunkRows = 256;

  // max_batch: the number of slots. ValueError for max_batch < 1, weights not on the CPU.
  Decoder(Config config, Weights weights, std::int64_t max_batch);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Adds a sequence; its prompt is prefilled at the next step. Returns its slot. ValueError for
  // an empty prompt, an id outside the vocabulary, max_new_tokens < 0, or no free slot.
  std::int64_t add(std::vector<std::int64_t> prompt, const Sampling& sampling,
                   std::vector<std::int64_t> stop_tokens, std::int64_t max_new_tokens);
  // Drops a sequence (a cancelled request); its slot is free at once. ValueError for a slot
  // that holds no sequence.
  void remove(std::int64_t slot);

  struct Event {
    std::int64_t slot;
    std::int64_t token;
    bool finished;  // the token was a stop token or the sequence's last
  };
  // One step: one sampled token for every decoding sequence, and prefill rows of the new
  // sequences, oldest first, up to max_rows rows in all (at least one prefill row; Note [Prefill
  // budget] in decoder.cpp); a sequence whose prompt is done in this step gets its first token.
  // A finished sequence frees its slot. A sequence added with max_new_tokens = 0 finishes with
  // token -1. ValueError for max_rows < 1.
  std::vector<Event> step(std::int64_t max_rows = std::numeric_limits<std::int64_t>::max());

  std::int64_t active() const;
  std::int64_t max_batch() const;
  const Config& config() const;

 private:
  struct State;
  State* state_;
};

}  // namespace kael::gpt
