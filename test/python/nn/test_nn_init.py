"""kael.nn.init: fans and gains as torch computes them, distributions checked statistically
(kael's generator is its own, so values are not torch's), reproducibility under manual_seed."""
import math

import pytest
import torch

import kael
import kael.nn as nn
from kael.nn import init


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3, 3), (7, 1), (2, 6, 4)])
def test_fan_in_and_fan_out_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(kael.empty(shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fan_of_1d_raises_like_torch():
    for lib, mod in ((torch, torch.nn.init), (kael, init)):
        with pytest.raises(ValueError, match="fewer than 2 dimensions"):
            mod.xavier_uniform_(lib.empty(3))


@pytest.mark.parametrize("name,param", [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                                        ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None), ("conv2d", None)])
def test_calculate_gain_matches_torch(name, param):
    assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope"):
        init.calculate_gain("leaky_relu", "x")


def moments(t):
    values = t.reshape(-1).tolist()
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return values, mean, var


N = 40000


def check_uniform(t, low, high):
    values, mean, var = moments(t)
    assert min(values) >= low and max(values) <= high
    width = high - low
    # the standard error of the mean is width / sqrt(12 N); 5 of them
    assert abs(mean - (low + high) / 2) < 5 * width / math.sqrt(12 * N)
    assert abs(var - width ** 2 / 12) < 0.03 * width ** 2 / 12
    # the extremes are reached: the top and bottom 1% are populated
    assert sum(v > high - 0.01 * width for v in values) > 0.005 * N
    assert sum(v < low + 0.01 * width for v in values) > 0.005 * N


def check_normal(t, mean_expected, std_expected):
    values, mean, var = moments(t)
    assert abs(mean - mean_expected) < 5 * std_expected / math.sqrt(N)
    assert abs(math.sqrt(var) - std_expected) < 0.03 * std_expected
    within = sum(abs(v - mean_expected) < std_expected for v in values) / N
    assert abs(within - 0.6827) < 0.015


def test_uniform_and_normal():
    kael.manual_seed(1)
    check_uniform(init.uniform_(kael.empty(N), -3.0, 2.0), -3.0, 2.0)
    check_normal(init.normal_(kael.empty(N), 1.5, 0.5), 1.5, 0.5)


def test_constant_ones_zeros_eye():
    t = kael.empty(3, 4)
    assert init.constant_(t, 2.5) is t and t.tolist() == [[2.5] * 4] * 3
    assert init.ones_(t).tolist() == [[1.0] * 4] * 3
    assert init.zeros_(t).tolist() == [[0.0] * 4] * 3
    assert init.eye_(kael.empty(2, 3)).tolist() == torch.nn.init.eye_(torch.empty(2, 3)).tolist()


@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_xavier(gain):
    kael.manual_seed(2)
    shape = (200, 200)
    a = gain * math.sqrt(6.0 / 400)
    check_uniform(init.xavier_uniform_(kael.empty(shape), gain=gain), -a, a)
    check_normal(init.xavier_normal_(kael.empty(shape), gain=gain), 0.0, gain * math.sqrt(2.0 / 400))


@pytest.mark.parametrize("a,mode,nonlinearity", [(0, "fan_in", "leaky_relu"), (math.sqrt(5), "fan_in", "leaky_relu"),
                                                 (0, "fan_out", "relu"), (0, "fan_in", "tanh")])
def test_kaiming(a, mode, nonlinearity):
    kael.manual_seed(3)
    shape = (100, 400)
    fan = 400 if mode == "fan_in" else 100
    std = torch.nn.init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    check_uniform(init.kaiming_uniform_(kael.empty(shape), a=a, mode=mode, nonlinearity=nonlinearity),
                  -bound, bound)
    check_normal(init.kaiming_normal_(kael.empty(shape), a=a, mode=mode, nonlinearity=nonlinearity), 0.0, std)


def test_kaiming_bad_mode_and_empty_tensor():
    for lib, mod in ((torch, torch.nn.init), (kael, init)):
        with pytest.raises(ValueError, match="Mode fan_avg not supported"):
            mod.kaiming_uniform_(lib.empty(3, 3), mode="fan_avg")
        with pytest.warns(UserWarning, match="no-op"):
            mod.kaiming_uniform_(lib.empty(0, 3))


def test_trunc_normal():
    kael.manual_seed(4)
    t = init.trunc_normal_(kael.empty(N), mean=0.0, std=1.0, a=-2.0, b=2.0)
    values, mean, var = moments(t)
    assert min(values) >= -2.0 and max(values) <= 2.0
    phi = math.exp(-2.0) / math.sqrt(2 * math.pi)
    mass = math.erf(2 / math.sqrt(2))
    expected_var = 1 - 2 * 2 * phi / mass
    assert abs(mean) < 5 * math.sqrt(expected_var / N)
    assert abs(var - expected_var) < 0.03 * expected_var
    narrow = init.trunc_normal_(kael.empty(1000), mean=1.0, std=2.0, a=0.5, b=1.0)
    assert min(narrow.tolist()) >= 0.5 and max(narrow.tolist()) <= 1.0


def test_initialisers_reproduce_under_manual_seed():
    kael.manual_seed(123)
    first = nn.Linear(5, 4)
    kael.manual_seed(123)
    second = nn.Linear(5, 4)
    assert first.weight.tolist() == second.weight.tolist()
    assert first.bias.tolist() == second.bias.tolist()
    generator = kael.Generator()
    generator.manual_seed(9)
    a = init.normal_(kael.empty(10), generator=generator).tolist()
    generator.manual_seed(9)
    assert init.normal_(kael.empty(10), generator=generator).tolist() == a


def test_linear_initialisation_matches_torch_scheme():
    kael.manual_seed(5)
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives the same bound as the bias
    check_uniform(layer.weight, -bound, bound)
    bias = layer.bias.tolist()
    assert min(bias) >= -bound and max(bias) <= bound and len(set(bias)) == 300


def test_embedding_initialisation_is_standard_normal():
    kael.manual_seed(6)
    check_normal(nn.Embedding(400, 100).weight, 0.0, 1.0)
