"""kael.models: complete models whose compute is C++ (libs/), with Python modules holding their
parameters.

>>> import kael
>>> model = kael.GPT(kael.GPTConfig(vocab_size=97, block_size=16, n_layer=2, n_head=4, n_embd=32))
>>> model(kael.zeros(1, 8, dtype=kael.int64)).shape
kael.Size([1, 8, 97])
"""
from kael.models.gpt import GPT, GPTConfig

__all__ = ["GPT", "GPTConfig"]
