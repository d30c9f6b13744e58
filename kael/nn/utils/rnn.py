"""kael.nn.utils.rnn: sequences of different lengths for the recurrent layers, as torch.nn.utils.rnn."""
