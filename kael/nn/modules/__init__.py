"""The layers of kael.nn."""
from kael.nn.modules.container import ModuleDict, ModuleList, Sequential
from kael.nn.modules.layers import (GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear, LogSoftmax, ReLU,
                                    Sigmoid, SiLU, Softmax, Tanh)
from kael.nn.modules.loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from kael.nn.modules.module import Module
from kael.nn.modules.transformer import MultiheadAttention, NonDynamicallyQuantizableLinear, TransformerEncoderLayer

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "ReLU", "GELU", "SiLU", "Sigmoid",
           "Tanh", "Softmax", "LogSoftmax", "Flatten", "Dropout", "LayerNorm", "Embedding", "MultiheadAttention",
           "NonDynamicallyQuantizableLinear", "TransformerEncoderLayer", "CrossEntropyLoss", "NLLLoss", "MSELoss",
           "L1Loss", "BCEWithLogitsLoss"]
