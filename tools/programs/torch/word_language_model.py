"""A word-level language model in the manner of pytorch/examples' word_language_model: a corpus
turned into a Dictionary and id tensors, batchified into columns, truncated backpropagation through
time over --bptt words, an LSTM (or GRU / RNN_TANH) with dropout and tied encoder/decoder weights
whose hidden state is detached between batches, or a TransformerEncoder with a sinusoidal positional
encoding and a causal mask; log_softmax + NLLLoss, gradient-norm clipping, plain SGD written as
p.data.add_(p.grad, alpha=-lr), the learning rate divided by 4 when validation stops improving, and
the best model saved and reloaded.

The corpus is synthetic: sentences of words drawn by a seeded NumPy generator from a small grammar.
"""
import argparse
import json
import math
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, seed):
        self.dictionary = Dictionary()
        self.train = self.tokenize(self.make_lines(seed, 400))
        self.valid = self.tokenize(self.make_lines(seed + 1, 60))
        self.test = self.tokenize(self.make_lines(seed + 2, 60))

    @staticmethod
    def make_lines(seed, n):
        rng = np.random.default_rng(seed)
        subjects = ["the cat", "a dog", "my friend", "the old man", "a bird", "the teacher", "our team"]
        verbs = ["sees", "likes", "finds", "follows", "helps", "calls", "meets"]
        objects = ["the ball", "a house", "the river", "some bread", "the city", "a letter", "the garden"]
        tails = ["", "today", "again", "in the morning", "at night", "with care", "very slowly"]
        return [" ".join(w for w in (subjects[rng.integers(7)], verbs[rng.integers(7)], objects[rng.integers(7)],
                                     tails[rng.integers(7)]) if w) for _ in range(n)]

    def tokenize(self, lines):
        idss = []
        for line in lines:
            words = line.split() + ['<eos>']
            ids = [self.dictionary.add_word(word) for word in words]
            idss.append(torch.tensor(ids).type(torch.int64))
        return torch.cat(idss)


class RNNModel(nn.Module):
    """An encoder, a recurrent module and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ['LSTM', 'GRU']:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {'RNN_TANH': 'tanh', 'RNN_RELU': 'relu'}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError('tied weights need nhid == emsize')
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Adds sin/cos of the position at geometric frequencies, then dropout."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    """An embedding, a positional encoding, a TransformerEncoder with a causal mask and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__()
        self.model_type = 'Transformer'
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src)).to(device)
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Detaches hidden states from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument('--model', type=str, default='LSTM', help='RNN_TANH, RNN_RELU, LSTM, GRU or Transformer')
    parser.add_argument('--emsize', type=int, default=32)
    parser.add_argument('--nhid', type=int, default=32)
    parser.add_argument('--nlayers', type=int, default=2)
    parser.add_argument('--lr', type=float, default=20)
    parser.add_argument('--clip', type=float, default=0.25)
    parser.add_argument('--steps', type=int, default=100, help='training batches in all')
    parser.add_argument('--batch_size', type=int, default=10)
    parser.add_argument('--bptt', type=int, default=16)
    parser.add_argument('--dropout', type=float, default=0.2)
    parser.add_argument('--tied', action='store_true', default=True)
    parser.add_argument('--seed', type=int, default=1111)
    parser.add_argument('--threads', type=int, default=0)
    parser.add_argument('--nhead', type=int, default=2)
    parser.add_argument('--log-interval', type=int, default=10)
    parser.add_argument('--init', default='', help='start from these weights (.npz of a state_dict)')
    parser.add_argument('--save-init', default='', help='write the initial weights (.npz) before training')
    parser.add_argument('--log', default='', help='write one JSON line per step (loss, seconds)')
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    log = open(args.log, 'w') if args.log else None

    corpus = Corpus(args.seed)
    eval_batch_size = 10
    train_data = batchify(corpus.train, args.batch_size, device)
    val_data = batchify(corpus.valid, eval_batch_size, device)
    test_data = batchify(corpus.test, eval_batch_size, device)

    ntokens = len(corpus.dictionary)
    if args.model == 'Transformer':
        model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers, args.dropout)
    else:
        model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
    if args.init:
        w = np.load(args.init)
        model.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    if args.save_init:
        np.savez(args.save_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model = model.to(device)
    criterion = nn.NLLLoss()

    def evaluate(data_source):
        model.eval()
        total_loss = 0.
        if args.model != 'Transformer':
            hidden = model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                if args.model == 'Transformer':
                    output = model(data)
                    output = output.view(-1, ntokens)
                else:
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    state = {'step': 0}

    def train(lr):
        model.train()
        total_loss = 0.
        start_time = time.time()
        if args.model != 'Transformer':
            hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            if state['step'] >= args.steps:
                break
            t0 = time.perf_counter()
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            if args.model == 'Transformer':
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                hidden = repackage_hidden(hidden)
                output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            lossf = loss.item()
            dt = time.perf_counter() - t0
            if log:
                log.write(json.dumps({'step': state['step'], 'loss': lossf, 'time': dt}) + '\n')
            state['step'] += 1
            total_loss += lossf
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                elapsed = time.time() - start_time
                print('| {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}'.format(
                    batch, len(train_data) // args.bptt, lr, elapsed * 1000 / args.log_interval, cur_loss,
                    math.exp(cur_loss)))
                total_loss = 0
                start_time = time.time()

    lr = args.lr
    best_val_loss = None
    tmp = tempfile.TemporaryDirectory(prefix='wlm_')  # removed at exit
    save = os.path.join(tmp.name, 'model.pt')
    epoch = 1
    while state['step'] < args.steps:
        epoch_start_time = time.time()
        train(lr)
        val_loss = evaluate(val_data)
        if log:
            log.write(json.dumps({'eval': f'val@{epoch}', 'loss': val_loss}) + '\n')
        print('| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}'.format(
            epoch, (time.time() - epoch_start_time), val_loss, math.exp(val_loss)))
        if not best_val_loss or val_loss < best_val_loss:
            with open(save, 'wb') as f:
                torch.save(model.state_dict(), f)
            best_val_loss = val_loss
        else:
            lr /= 4.0  # anneal when validation stops improving
        epoch += 1

    with open(save, 'rb') as f:
        model.load_state_dict(torch.load(f))
        if args.model in ['RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU']:
            model.rnn.flatten_parameters()
    test_loss = evaluate(test_data)
    if log:
        log.write(json.dumps({'eval': 'test', 'loss': test_loss}) + '\n')
        log.close()
    print('| End of training | test loss {:5.2f} | test ppl {:8.2f}'.format(test_loss, math.exp(test_loss)))


if __name__ == '__main__':
    main()
