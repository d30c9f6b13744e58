"""The layers of kael.nn."""
from kael.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from kael.nn.modules.layers import (GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear, LogSoftmax, ReLU,
                                    Sigmoid, SiLU, Softmax, Tanh)
from kael.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                                  MarginRankingLoss, MSELoss, NLLLoss, SmoothL1Loss, SoftMarginLoss)
from kael.nn.modules import activation as _activation
from kael.nn.modules.activation import *  # noqa: F401,F403
from kael.nn.modules.module import Module
from kael.nn.modules.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from kael.nn.modules import pooling as _pooling
from kael.nn.modules.pooling import *  # noqa: F401,F403
from kael.nn.modules.transformer import MultiheadAttention, NonDynamicallyQuantizableLinear, TransformerEncoderLayer
from kael.nn.modules.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                                         TransformerEncoder)

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Identity", "Linear", "ReLU", "GELU", "SiLU", "Sigmoid",
           "Tanh", "Softmax", "LogSoftmax", "Flatten", "Dropout", "LayerNorm", "Embedding", "MultiheadAttention",
           "NonDynamicallyQuantizableLinear", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder", "Transformer", "CrossEntropyLoss", "NLLLoss", "MSELoss",
           "L1Loss", "BCEWithLogitsLoss", "BCELoss", "HuberLoss", "KLDivLoss", "MarginRankingLoss", "SmoothL1Loss",
           "SoftMarginLoss"]
__all__ += [name for name, value in vars(_activation).items()
            if isinstance(value, type) and issubclass(value, Module) and not name.startswith("_")
            and value.__module__ == _activation.__name__]
__all__ += _pooling.__all__
__all__ += ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]
from kael.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: E402
__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
