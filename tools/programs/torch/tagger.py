"""A sequence tagger in the manner of the PyTorch NLP tutorials: word embeddings (padding index 0),
a bidirectional LSTM run over packed sequences of different lengths (pack_padded_sequence /
pad_packed_sequence), a linear layer to tag scores, cross_entropy that ignores the padding, Adam,
and accuracy over the real tokens under torch.no_grad().

The sentences are synthetic: words of a small lexicon whose tag depends on the word and on the tag
before it, from a seeded NumPy generator.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.data import DataLoader, TensorDataset

PAD_TAG = -100


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab_size, tagset_size, embedding_dim=24, hidden_dim=32, num_layers=1, dropout=0.3):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers=num_layers, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.hidden2tag = nn.Linear(2 * hidden_dim, tagset_size)

    def forward(self, sentences, lengths):
        embeds = self.dropout(self.embedding(sentences))
        packed = pack_padded_sequence(embeds, lengths, batch_first=True, enforce_sorted=False)
        packed_out, (h_n, c_n) = self.lstm(packed)
        out, out_lengths = pad_packed_sequence(packed_out, batch_first=True, total_length=sentences.size(1))
        return self.hidden2tag(self.dropout(out))


def make_corpus(seed, n, max_len=12, vocab=40, ntags=5):
    """Sentences (n, max_len) of word ids 1..vocab-1 padded with 0, their lengths and tags (-100 on padding)."""
    rng = np.random.default_rng(seed)
    word_tag = np.random.default_rng(0).integers(0, ntags, vocab)  # the same lexicon for every split
    sentences = np.zeros((n, max_len), np.int64)
    tags = np.full((n, max_len), PAD_TAG, np.int64)
    lengths = rng.integers(2, max_len + 1, n)
    for i, length in enumerate(lengths):
        words = rng.integers(1, vocab, length)
        sentences[i, :length] = words
        prev = 0
        for t, w in enumerate(words):
            tag = (word_tag[w] + (prev == 2)) % ntags  # a word after a tag-2 word shifts its tag
            tags[i, t] = tag
            prev = tag
    return sentences, lengths, tags


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--steps', type=int, default=100)
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--lr', type=float, default=0.01)
    parser.add_argument('--dropout', type=float, default=0.3)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    log = open(args.log, 'w') if args.log else None

    x, lengths, y = make_corpus(args.seed, 10 * args.batch_size)
    xt, lengths_t, yt = make_corpus(args.seed + 1, 64)
    train_set = TensorDataset(torch.from_numpy(x), torch.from_numpy(lengths), torch.from_numpy(y))
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=False, drop_last=True)

    model = BiLSTMTagger(40, 5, dropout=args.dropout)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    def evaluate():
        model.eval()
        with torch.no_grad():
            sentences, tags = torch.from_numpy(xt).to(device), torch.from_numpy(yt).to(device)
            scores = model(sentences, torch.from_numpy(lengths_t))  # lengths stay on the CPU
            loss = F.cross_entropy(scores.view(-1, scores.size(-1)), tags.view(-1), ignore_index=PAD_TAG)
            mask = tags != PAD_TAG
            correct = (scores.argmax(-1) == tags)[mask].sum().item()
            total = mask.sum().item()
        model.train()
        return loss.item(), correct / total

    step = 0
    epoch = 0
    while step < args.steps:
        for sentences, lens, tags in loader:
            if step >= args.steps:
                break
            t0 = time.perf_counter()
            sentences, tags = sentences.to(device), tags.to(device)
            optimizer.zero_grad()
            scores = model(sentences, lens)
            loss = F.cross_entropy(scores.view(-1, scores.size(-1)), tags.view(-1), ignore_index=PAD_TAG)
            loss.backward()
            optimizer.step()
            lossf = loss.item()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': step, 'loss': lossf, 'time': dt}) + '\n')
            step += 1
        epoch += 1
        val_loss, acc = evaluate()
        print(f"epoch {epoch}: train loss {lossf:.4f}, test loss {val_loss:.4f}, accuracy {acc:.3f}")
        if log:
            log.write(json.dumps({'eval': f'test@{epoch}', 'loss': val_loss}) + '\n')
    if log:
        log.close()


if __name__ == '__main__':
    main()
