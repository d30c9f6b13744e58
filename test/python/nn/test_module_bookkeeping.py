"""nn.Module bookkeeping against torch: every form of assigning, replacing and deleting
parameters, buffers and child modules (and the item forms of the containers) keeps the tables,
their order, state_dict()/named_*() and load_state_dict() as torch keeps them; values live once,
in their table, never in the instance __dict__."""
from collections import OrderedDict

import pytest
import torch

import kael


def _build(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 3)
            self.w = nn.Parameter(lib.ones(3))
            self.register_buffer("running", lib.zeros(3))
            self.register_buffer("scratch", lib.zeros(1), persistent=False)
            self.b = nn.Linear(3, 2)
            self.v = nn.Parameter(lib.zeros(2))
            self.register_buffer("count", lib.tensor(0))
            self.plain = 5

    return Net()


def _values(named):
    return [(n, v.tolist() if v is not None else None) for n, v in named]


def _snapshot(m):
    tables = {k: m.__dict__[k] for k in ("_parameters", "_buffers", "_modules")}
    registered = set().union(*tables.values())
    return {
        "parameters": _values(m.named_parameters()),
        "buffers": _values(m.named_buffers()),
        "modules": [n for n, _ in m.named_modules()],
        "children": [n for n, _ in m.named_children()],
        "state_dict": _values(m.state_dict().items()),
        "tables": {k: list(v) for k, v in tables.items()},
        "in __dict__ too": sorted(k for k in m.__dict__ if k in registered),
        "attrs": {n: (type(getattr(m, n)).__name__ if hasattr(m, n) else "missing")
                  for n in ("a", "b", "w", "v", "running", "scratch", "count", "plain", "z")},
    }


def _P(lib, values):
    return lib.nn.Parameter(lib.tensor(values))


# Each case changes the module built by _build(lib); a raised exception is compared by class.
CASES = {
    "new parameter": lambda lib, m: setattr(m, "z", _P(lib, [7.0])),
    "same-name parameter": lambda lib, m: setattr(m, "w", _P(lib, [2.0, 2.0, 2.0])),
    "same-name module": lambda lib, m: setattr(m, "a", lib.nn.Linear(2, 3)),
    "module to None": lambda lib, m: setattr(m, "a", None),
    "module to int": lambda lib, m: setattr(m, "a", 3),
    "module to tensor": lambda lib, m: setattr(m, "a", lib.zeros(1)),
    "module to parameter": lambda lib, m: setattr(m, "a", _P(lib, [1.0])),
    "parameter to tensor": lambda lib, m: setattr(m, "w", lib.zeros(3)),
    "parameter to None": lambda lib, m: setattr(m, "w", None),
    "parameter to None and back": lambda lib, m: (setattr(m, "w", None), setattr(m, "w", _P(lib, [3.0]))),
    "parameter to module": lambda lib, m: setattr(m, "w", lib.nn.Linear(1, 1)),
    "parameter to int": lambda lib, m: setattr(m, "w", 1),
    "buffer to tensor": lambda lib, m: setattr(m, "running", lib.ones(3)),
    "buffer to None": lambda lib, m: setattr(m, "running", None),
    "buffer to None and back": lambda lib, m: (setattr(m, "running", None), setattr(m, "running", lib.ones(2))),
    "buffer to int": lambda lib, m: setattr(m, "running", 1),
    "buffer to parameter": lambda lib, m: setattr(m, "running", _P(lib, [1.0])),
    "buffer to module": lambda lib, m: setattr(m, "running", lib.nn.Linear(1, 1)),
    "non-persistent buffer to tensor": lambda lib, m: setattr(m, "scratch", lib.ones(4)),
    "non-persistent buffer to None and back": lambda lib, m: (setattr(m, "scratch", None),
                                                              setattr(m, "scratch", lib.ones(2))),
    "buffer in place": lambda lib, m: m.running.add_(1),
    "plain attribute to parameter": lambda lib, m: setattr(m, "plain", _P(lib, [1.0])),
    "plain attribute to module": lambda lib, m: setattr(m, "plain", lib.nn.Linear(1, 1)),
    "plain attribute to tensor": lambda lib, m: setattr(m, "plain", lib.ones(1)),
    "del parameter": lambda lib, m: delattr(m, "w"),
    "del buffer": lambda lib, m: delattr(m, "running"),
    "del non-persistent buffer": lambda lib, m: delattr(m, "scratch"),
    "del module": lambda lib, m: delattr(m, "a"),
    "del plain": lambda lib, m: delattr(m, "plain"),
    "del missing": lambda lib, m: delattr(m, "nothing"),
    "del parameter then new": lambda lib, m: (delattr(m, "w"), setattr(m, "w", _P(lib, [1.0]))),
    "register_buffer over parameter": lambda lib, m: m.register_buffer("w", lib.ones(1)),
    "register_buffer over plain": lambda lib, m: m.register_buffer("plain", lib.ones(1)),
    "register_buffer again": lambda lib, m: m.register_buffer("running", lib.ones(1)),
    "register_buffer again non-persistent": lambda lib, m: m.register_buffer("running", lib.ones(1), False),
    "register_buffer non-persistent again persistent": lambda lib, m: m.register_buffer("scratch", lib.ones(1)),
    "register_parameter over buffer": lambda lib, m: m.register_parameter("running", _P(lib, [1.0])),
    "register_parameter again": lambda lib, m: m.register_parameter("w", _P(lib, [4.0])),
    "register_parameter None": lambda lib, m: m.register_parameter("z", None),
    "register_parameter non-leaf": lambda lib, m: m.register_parameter(
        "z", lib.nn.Parameter(lib.ones(1)) * 2),
    "add_module over parameter": lambda lib, m: m.add_module("w", lib.nn.Linear(1, 1)),
    "add_module again": lambda lib, m: m.add_module("a", lib.nn.Linear(2, 3)),
    "add_module None": lambda lib, m: m.add_module("z", None),
    "nested parameter replaced": lambda lib, m: setattr(m.a, "weight", lib.nn.Parameter(lib.zeros(3, 2))),
    "nested buffer-less module replaced": lambda lib, m: setattr(m, "b", lib.nn.Linear(3, 2, bias=False)),
}


def _run(lib, case):
    lib.manual_seed(0)
    m = _build(lib)
    try:
        CASES[case](lib, m)
        error = None
    except Exception as e:  # compared by class with torch's
        error = type(e).__name__
    return error, _snapshot(m)


def _normalise(snap):
    # the values of freshly made Linear layers are random: compare their shapes only
    out = dict(snap)
    for key in ("parameters", "buffers", "state_dict"):
        out[key] = [(n, v if "." not in n else _shape(v)) for n, v in snap[key]]
    return out


def _shape(v):
    shape = []
    while isinstance(v, list):
        shape.append(len(v))
        v = v[0] if v else None
    return shape


@pytest.mark.parametrize("case", list(CASES))
def test_assignment_forms_match_torch(case):
    k_error, k_snap = _run(kael, case)
    t_error, t_snap = _run(torch, case)
    assert k_error == t_error
    assert _normalise(k_snap) == _normalise(t_snap)


def test_parameter_replaced_in_place_keeps_optimizer_order():
    # m.weight = Parameter(...) used to move weight after bias: an optimizer built from the new
    # parameters() then paired its state with the wrong tensors
    outs = []
    for lib in (torch, kael):
        m = lib.nn.Linear(3, 2)
        new = lib.nn.Parameter(lib.ones(2, 3))
        m.weight = new
        params = list(m.parameters())
        assert params[0] is new and params[1] is m.bias
        assert m.weight is new and "weight" not in vars(m)
        outs.append((list(m.state_dict()), [n for n, _ in m.named_parameters()]))
    assert outs[0] == outs[1]


def test_buffer_assignment_survives_checkpoint():
    # the reported case: self.running_mean = new tensor must stay a buffer (and in state_dict)
    class Stats(kael.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running_mean", kael.zeros(2))

        def forward(self, x):
            self.running_mean = 0.9 * self.running_mean + 0.1 * x.mean(0)
            return x

    m = Stats()
    m(kael.ones(4, 2))
    assert list(m.state_dict()) == ["running_mean"]
    fresh = Stats()
    fresh.load_state_dict(m.state_dict())
    assert fresh.running_mean.tolist() == pytest.approx([0.1, 0.1])


def _seq_case(lib, action):
    lib.manual_seed(0)
    nn = lib.nn
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4), nn.Tanh())
    try:
        action(lib, seq)
        error = None
    except Exception as e:
        error = type(e).__name__
    return error, seq


def _seq_snapshot(seq):
    return ([(n, type(c).__name__) for n, c in seq.named_children()], list(seq.state_dict()),
            [n for n, _ in seq.named_parameters()])


SEQUENTIAL_CASES = {
    "setitem 0": lambda lib, s: s.__setitem__(0, lib.nn.Linear(2, 3)),
    "setitem -1": lambda lib, s: s.__setitem__(-1, lib.nn.Sigmoid()),
    "setitem None": lambda lib, s: s.__setitem__(1, None),
    "setitem int": lambda lib, s: s.__setitem__(1, 7),
    "setitem out of range": lambda lib, s: s.__setitem__(4, lib.nn.ReLU()),
    "delitem 0": lambda lib, s: s.__delitem__(0),
    "delitem -2": lambda lib, s: s.__delitem__(-2),
    "delitem slice": lambda lib, s: s.__delitem__(slice(1, 3)),
    "delitem step": lambda lib, s: s.__delitem__(slice(None, None, 2)),
    "delitem out of range": lambda lib, s: s.__delitem__(9),
    "pop 1": lambda lib, s: s.pop(1),
    "append": lambda lib, s: s.append(lib.nn.Linear(4, 1)),
    "setattr by name": lambda lib, s: setattr(s, "2", lib.nn.Linear(3, 4)),
    "delete then setitem": lambda lib, s: (s.__delitem__(1), s.__setitem__(0, lib.nn.Linear(2, 3))),
}


@pytest.mark.parametrize("case", list(SEQUENTIAL_CASES))
def test_sequential_items_match_torch(case):
    k_error, k_seq = _seq_case(kael, SEQUENTIAL_CASES[case])
    t_error, t_seq = _seq_case(torch, SEQUENTIAL_CASES[case])
    assert k_error == t_error
    assert _seq_snapshot(k_seq) == _seq_snapshot(t_seq)


def test_sequential_replaced_layer_runs_in_its_place():
    # seq[0] = Linear(...) used to move layer 0 to the end of _modules: Sequential ran it last
    outs = []
    for lib in (torch, kael):
        nn = lib.nn
        seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        first = nn.Linear(2, 3)
        seq[0] = first
        with lib.no_grad():
            for i, p in enumerate(seq.parameters()):
                p.copy_(lib.arange(p.numel(), dtype=lib.float32).reshape(p.shape) * 0.1 - 0.2 * i)
        assert seq[0] is first and list(seq)[0] is first
        outs.append(seq(lib.tensor([[1.0, -2.0], [0.5, 3.0]])).flatten().tolist())
    assert outs[1] == pytest.approx(outs[0])


MODULELIST_CASES = {
    "setitem": lambda lib, ml: ml.__setitem__(1, lib.nn.Linear(1, 2)),
    "setitem -1": lambda lib, ml: ml.__setitem__(-1, lib.nn.Tanh()),
    "setitem None": lambda lib, ml: ml.__setitem__(0, None),
    "setitem str": lambda lib, ml: ml.__setitem__(0, "x"),
    "delitem": lambda lib, ml: ml.__delitem__(1),
    "delitem slice": lambda lib, ml: ml.__delitem__(slice(0, 2)),
    "insert 0": lambda lib, ml: ml.insert(0, lib.nn.Sigmoid()),
    "insert 2": lambda lib, ml: ml.insert(2, lib.nn.Sigmoid()),
    "insert end": lambda lib, ml: ml.insert(3, lib.nn.Sigmoid()),
    "pop": lambda lib, ml: ml.pop(0),
    "extend": lambda lib, ml: ml.extend([lib.nn.ReLU(), lib.nn.Linear(1, 1)]),
    "iadd": lambda lib, ml: ml.__iadd__([lib.nn.ReLU()]),
}


@pytest.mark.parametrize("case", list(MODULELIST_CASES))
def test_modulelist_items_match_torch(case):
    snaps = []
    for lib in (torch, kael):
        lib.manual_seed(0)
        ml = lib.nn.ModuleList([lib.nn.Linear(1, 2), lib.nn.ReLU(), lib.nn.Linear(2, 1)])
        try:
            MODULELIST_CASES[case](lib, ml)
            error = None
        except Exception as e:
            error = type(e).__name__
        snaps.append((error, _seq_snapshot(ml), [type(x).__name__ for x in ml]))
    assert snaps[1] == snaps[0]


MODULEDICT_CASES = {
    "setitem existing": lambda lib, md: md.__setitem__("first", lib.nn.Linear(1, 2)),
    "setitem new": lambda lib, md: md.__setitem__("zz", lib.nn.ReLU()),
    "setitem None": lambda lib, md: md.__setitem__("first", None),
    "setitem int": lambda lib, md: md.__setitem__("first", 3),
    "delitem": lambda lib, md: md.__delitem__("first"),
    "delitem missing": lambda lib, md: md.__delitem__("nope"),
    "pop": lambda lib, md: md.pop("act"),
    "update": lambda lib, md: md.update([("act", lib.nn.Tanh()), ("new", lib.nn.ReLU())]),
    "clear": lambda lib, md: md.clear(),
}


@pytest.mark.parametrize("case", list(MODULEDICT_CASES))
def test_moduledict_items_match_torch(case):
    snaps = []
    for lib in (torch, kael):
        lib.manual_seed(0)
        md = lib.nn.ModuleDict(OrderedDict([("first", lib.nn.Linear(1, 2)), ("act", lib.nn.ReLU()),
                                            ("last", lib.nn.Linear(2, 1))]))
        try:
            MODULEDICT_CASES[case](lib, md)
            error = None
        except Exception as e:
            error = type(e).__name__
        snaps.append((error, _seq_snapshot(md), list(md.keys()), [type(v).__name__ for v in md.values()]))
    assert snaps[1] == snaps[0]


PARAMETERLIST_CASES = {
    "nothing": lambda lib, pl: None,
    "setitem parameter": lambda lib, pl: pl.__setitem__(0, _P(lib, [9.0])),
    "setitem tensor": lambda lib, pl: pl.__setitem__(1, lib.tensor([8.0, 8.0])),
    "setitem -1": lambda lib, pl: pl.__setitem__(-1, _P(lib, [7.0])),
    "setitem out of range": lambda lib, pl: pl.__setitem__(3, _P(lib, [7.0])),
    "setitem None": lambda lib, pl: pl.__setitem__(0, None),
    "setitem object": lambda lib, pl: pl.__setitem__(0, "text"),
    "delitem": lambda lib, pl: pl.__delitem__(0),
    "append": lambda lib, pl: pl.append(lib.zeros(2)),
    "extend": lambda lib, pl: pl.extend([lib.zeros(1), _P(lib, [1.0])]),
    "extend tensor": lambda lib, pl: pl.extend(lib.zeros(2)),
    "slice": lambda lib, pl: pl.append(pl[1:]),
}


def _param_snapshot(m):
    return (_values(m.named_parameters()), list(m.state_dict()),
            [type(v).__name__ for v in (m.values() if hasattr(m, "values") else m)], len(m))


@pytest.mark.parametrize("case", list(PARAMETERLIST_CASES))
def test_parameterlist_matches_torch(case):
    snaps = []
    for lib in (torch, kael):
        pl = lib.nn.ParameterList([_P(lib, [1.0]), lib.tensor([2.0, 3.0]), _P(lib, [4.0])])
        try:
            PARAMETERLIST_CASES[case](lib, pl)
            error = None
        except Exception as e:
            error = type(e).__name__
        snaps.append((error, _param_snapshot(pl) if case != "slice" or error else len(pl)))
    assert snaps[1] == snaps[0]


PARAMETERDICT_CASES = {
    "nothing": lambda lib, pd: None,
    "setitem existing": lambda lib, pd: pd.__setitem__("a", _P(lib, [9.0])),
    "setitem tensor": lambda lib, pd: pd.__setitem__("b", lib.tensor([8.0])),
    "setitem new": lambda lib, pd: pd.__setitem__("0", _P(lib, [7.0])),
    "setitem None": lambda lib, pd: pd.__setitem__("a", None),
    "delitem": lambda lib, pd: pd.__delitem__("a"),
    "delitem missing": lambda lib, pd: pd.__delitem__("zz"),
    "pop": lambda lib, pd: pd.pop("b"),
    "popitem": lambda lib, pd: pd.popitem(),
    "update dict": lambda lib, pd: pd.update({"z": lib.ones(1), "c": lib.zeros(1)}),
    "update pairs": lambda lib, pd: pd.update([("z", lib.ones(1)), ("c", lib.zeros(1))]),
    "setdefault": lambda lib, pd: pd.setdefault("q", lib.ones(2)),
    "clear": lambda lib, pd: pd.clear(),
}


@pytest.mark.parametrize("case", list(PARAMETERDICT_CASES))
def test_parameterdict_matches_torch(case):
    snaps = []
    for lib in (torch, kael):
        pd = lib.nn.ParameterDict(OrderedDict([("b", _P(lib, [1.0])), ("a", lib.tensor([2.0, 3.0])),
                                               ("c", _P(lib, [4.0]))]))
        try:
            PARAMETERDICT_CASES[case](lib, pd)
            error = None
        except Exception as e:
            error = type(e).__name__
        snaps.append((error, _param_snapshot(pd), list(pd.keys())))
    assert snaps[1] == snaps[0]


def test_parameterdict_non_string_key_raises():
    for lib in (torch, kael):
        with pytest.raises(TypeError, match="not a string"):
            lib.nn.ParameterDict()[1] = _P(lib, [7.0])


def test_load_state_dict_after_reassignments_matches_torch():
    outs = []
    for lib in (torch, kael):
        lib.manual_seed(0)
        m = _build(lib)
        m.w = _P(lib, [5.0, 6.0, 7.0])
        m.running = lib.full((3,), 2.0)
        m.a = lib.nn.Linear(2, 3)
        state = OrderedDict((k, lib.full(v.shape, float(i)) if v.is_floating_point() else v)
                            for i, (k, v) in enumerate(m.state_dict().items()))
        result = m.load_state_dict(state)
        outs.append((list(result.missing_keys), list(result.unexpected_keys), _values(m.state_dict().items()),
                     _values(m.named_buffers())))
    assert outs[1] == outs[0]


def test_dir_lists_registered_names():
    for lib in (torch, kael):
        m = _build(lib)
        names = dir(m)
        assert {"a", "b", "w", "v", "running", "scratch", "count", "plain"} <= set(names)
