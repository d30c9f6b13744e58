"""Recurrent layers: RNN, LSTM, GRU and their cells, with torch's parameters, shapes and errors.

Each direction of each layer runs as one registered op, `kael._rnn_layer`, over the whole
(packed) sequence: one autograd node per layer-direction, its backward pass through time in C++
(docs/decisions/recurrent.md). The modules here check the arguments, lay the input out as the op
reads it (time-major rows, packed), and stack the layers and directions.
"""
import math
import numbers
import warnings

import kael
from kael import _C
from kael.nn import functional as F
from kael.nn import init
from kael.nn.modules.module import Module
from kael.nn.parameter import Parameter
from kael.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _apply_permutation(tensor, permutation, dim=1):
    return tensor.index_select(dim, permutation)


def _empty(shape, factory_kwargs):
    return kael.empty(tuple(shape), dtype=factory_kwargs.get("dtype"),
                      device=factory_kwargs.get("device") or "cpu")


def _run_layers(mode, input, batch_sizes, hx, cx, weights, has_biases, num_layers, dropout, training,
                bidirectional, proj):
    """The stacked layers over packed rows `input` (N, features): output (N, D * out) and h_n (and c_n)
    of shape (num_layers * D, B, out)."""
    D = 2 if bidirectional else 1
    per = len(weights) // (num_layers * D)
    layer_input = input
    hs, cs = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            k = layer * D + d
            w = weights[k * per:(k + 1) * per]
            tensors = [layer_input, hx[k]] + ([cx[k]] if mode == "LSTM" else []) + list(w)
            out, h_n, c_n, _ = _C._rnn_layer(tensors, batch_sizes, mode, has_biases, d == 1)
            outs.append(out)
            hs.append(h_n)
            if mode == "LSTM":
                cs.append(c_n)
        layer_input = outs[0] if D == 1 else kael.cat(outs, 1)
        if dropout > 0 and training and layer < num_layers - 1:
            layer_input = F.dropout(layer_input, dropout, True)
    h = kael.stack(hs, 0)
    c = kael.stack(cs, 0) if mode == "LSTM" else None
    return layer_input, h, c


class RNNBase(Module):
    """The parameters and the forward pass shared by RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        name = type(self).__name__
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the probability of "
                             "an element being zeroed")
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"{name}: bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"{name}: batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"{name}: input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError(f"{name}: input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"{name}: hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError(f"{name}: Unrecognized RNN mode: " + str(mode))
        gate_size = _GATES[mode] * hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [(f"weight_ih_l{layer}{suffix}", (gate_size, layer_input_size)),
                          (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden_size))]
                if bias:
                    params += [(f"bias_ih_l{layer}{suffix}", (gate_size,)), (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size > 0:
                    params += [(f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size))]
                for pname, shape in params:
                    setattr(self, pname, Parameter(_empty(shape, factory_kwargs)))
                names = [p for p, _ in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) if hasattr(self, n) else None for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, weight) for weight in weights] for weights in self._all_weights]

    def flatten_parameters(self):
        """A no-op: kael's layers read the parameters where they are (torch flattens them for cuDNN)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ---- checks, as torch's

    def check_input(self, input, batch_sizes):
        name = type(self).__name__
        w0 = self._flat_weights[0]
        if input.dtype != w0.dtype:
            raise ValueError(f"{name}: RNN input dtype ({input.dtype}) does not match weight dtype ({w0.dtype}). "
                             f"Convert input: input.to({w0.dtype}), or convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"{name}: input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        out = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, out)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(f"{type(self).__name__}: " + msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    # ---- forward

    def _prepare(self, input, hx):
        """(rows, batch_sizes, hx, state of the call) from the forward arguments."""
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        num_directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            bs = [int(v) for v in batch_sizes.tolist()]
            is_batched, packed = True, True
            if hx is not None:
                hx = tuple(self.permute_hidden(h, sorted_indices) for h in hx) if lstm else \
                    self.permute_hidden(hx, sorted_indices)
            rows = data
            check_input, steps, batch = data, None, bs[0]
        else:
            packed = False
            sorted_indices = unsorted_indices = None
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 f"{'tensor instead' if self.mode.startswith('RNN') else 'instead'}")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
                if hx is not None:
                    if lstm:
                        if hx[0].dim() != 2 or hx[1].dim() != 2:
                            raise RuntimeError(f"{name}: For unbatched 2-D input, hx and cx should also be 2-D but "
                                               f"got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                        hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
                    else:
                        if hx.dim() != 2:
                            raise RuntimeError(f"{name}: For unbatched 2-D input, hx should also be 2-D but got "
                                               f"{hx.dim()}-D tensor")
                        hx = hx.unsqueeze(1)
            elif hx is not None:
                if lstm:
                    if hx[0].dim() != 3 or hx[1].dim() != 3:
                        raise RuntimeError(f"{name}: For batched 3-D input, hx and cx should also be 3-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                elif hx.dim() != 3:
                    raise RuntimeError(f"{name}: For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D "
                                       "tensor")
            check_input = input
            batch_sizes = None
        self.check_input(check_input, batch_sizes if packed else None)
        if not packed:
            time_major = input.transpose(0, 1) if self.batch_first else input
            steps, batch = time_major.shape[0], time_major.shape[1]
            bs = [batch] * steps
            rows = time_major.contiguous().reshape(steps * batch, self.input_size)
        dtype, device = check_input.dtype, check_input.device
        if hx is None:
            h = kael.zeros((self.num_layers * num_directions, batch, real_hidden), dtype=dtype, device=device)
            c = kael.zeros((self.num_layers * num_directions, batch, self.hidden_size), dtype=dtype,
                           device=device) if lstm else None
        elif lstm:
            h, c = hx
            expected = self.get_expected_hidden_size(check_input, batch_sizes if packed else None)
            self.check_hidden_size(h, expected, "Expected hidden[0] size {}, got {}")
            expected_c = (expected[0], expected[1], self.hidden_size)
            self.check_hidden_size(c, expected_c, "Expected hidden[1] size {}, got {}")
        else:
            h, c = hx, None
            self.check_hidden_size(h, self.get_expected_hidden_size(check_input, batch_sizes if packed else None))
        return rows, bs, h, c, (packed, is_batched, steps, batch, batch_sizes, sorted_indices, unsorted_indices)

    def _forward(self, input, hx):
        rows, bs, h, c, (packed, is_batched, steps, batch, batch_sizes, sorted_indices, unsorted_indices) = \
            self._prepare(input, hx)
        lstm = self.mode == "LSTM"
        if len(bs) == 0 or batch == 0:
            raise RuntimeError(f"{type(self).__name__}: expected a non-empty input, got {len(bs)} steps of batch "
                               f"{batch}")
        out, h_n, c_n = _run_layers(self.mode, rows, bs, h, c, self._flat_weights, self.bias, self.num_layers,
                                    self.dropout, self.training, self.bidirectional, self.proj_size)
        if packed:
            output = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
            h_n = self.permute_hidden(h_n, unsorted_indices)
            if lstm:
                c_n = self.permute_hidden(c_n, unsorted_indices)
            return output, ((h_n, c_n) if lstm else h_n)
        output = out.reshape(steps, batch, out.shape[-1])
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(0 if self.batch_first else 1)
            h_n = h_n.squeeze(1)
            if lstm:
                c_n = c_n.squeeze(1)
        return output, ((h_n, c_n) if lstm else h_n)

    def forward(self, input, hx=None):
        return self._forward(input, hx)


class RNN(RNNBase):
    """Elman RNN, h_t = tanh (or relu) (x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), as torch.nn.RNN."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("RNN: proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"RNN: Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def __setattr__(self, name, value):
        if name == "nonlinearity" and "_parameters" not in self.__dict__:
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o; optional projections proj_size), as torch.nn.LSTM."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        expected = self.get_expected_hidden_size(input, batch_sizes)
        return (expected[0], expected[1], self.hidden_size)


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))), as torch.nn.GRU."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("GRU: proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ---------------------------------------------------------------- cells

class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_empty((num_chunks * hidden_size, input_size), factory_kwargs))
        self.weight_hh = Parameter(_empty((num_chunks * hidden_size, hidden_size), factory_kwargs))
        if bias:
            self.bias_ih = Parameter(_empty((num_chunks * hidden_size,), factory_kwargs))
            self.bias_hh = Parameter(_empty((num_chunks * hidden_size,), factory_kwargs))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _cell(self, mode, input, hx, cx=None):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if input.size(1) != self.input_size:
            raise RuntimeError(f"{name}: input has inconsistent input_size: got {input.size(1)} expected "
                               f"{self.input_size}")
        batch = input.size(0)
        if hx is None:
            hx = kael.zeros((batch, self.hidden_size), dtype=input.dtype, device=input.device)
            if mode == "LSTM":
                cx = kael.zeros((batch, self.hidden_size), dtype=input.dtype, device=input.device)
        elif not is_batched:
            hx = hx.unsqueeze(0)
            if cx is not None:
                cx = cx.unsqueeze(0)
        for which, t in (("hx", hx), ("cx", cx)):
            if t is None:
                continue
            if t.dim() != 2 or t.size(0) != batch:
                raise RuntimeError(f"{name}: Input batch size {batch} doesn't match hidden{'0' if which == 'hx' else '1'} "
                                   f"batch size {t.size(0) if t.dim() else 1}")
            if t.size(1) != self.hidden_size:
                raise RuntimeError(f"{name}: hidden{'0' if which == 'hx' else '1'} has inconsistent hidden_size: got "
                                   f"{t.size(1)}, expected {self.hidden_size}")
        if input.dtype != self.weight_ih.dtype:
            raise RuntimeError(f"{name}: expected input of dtype {self.weight_ih.dtype}, got {input.dtype}")
        tensors = [input, hx] + ([cx] if mode == "LSTM" else []) + [self.weight_ih, self.weight_hh]
        if self.bias:
            tensors += [self.bias_ih, self.bias_hh]
        out, h, c, _ = _C._rnn_layer(tensors, [batch], mode, self.bias, False)
        if not is_batched:
            h = h.squeeze(0)
            c = c.squeeze(0) if mode == "LSTM" else c
        return (h, c) if mode == "LSTM" else h


class RNNCell(RNNCellBase):
    """One step of an Elman RNN, as torch.nn.RNNCell."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise RuntimeError(f"RNNCell: Unknown nonlinearity: {self.nonlinearity}")
        return self._cell(mode, input, hx)


class LSTMCell(RNNCellBase):
    """One step of an LSTM, as torch.nn.LSTMCell; forward(input, (h, c)) returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is None:
            return self._cell("LSTM", input, None)
        return self._cell("LSTM", input, hx[0], hx[1])


class GRUCell(RNNCellBase):
    """One step of a GRU, as torch.nn.GRUCell."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._cell("GRU", input, hx)
