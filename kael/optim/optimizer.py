"""kael.optim.Optimizer: parameter groups, per-parameter state and its (de)serialisation."""
import copy
import functools

import kael
from kael.nn._grad import no_grad


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _update_under_no_grad(step):
    """Runs an optimizer's step under no_grad (the closure, if any, under enable_grad)."""
    @functools.wraps(step)
    def wrapper(self, closure=None):
        loss = None
        if closure is not None:
            with kael.enable_grad():
                loss = closure()
        with no_grad():
            step(self)
        return loss
    del wrapper.__wrapped__  # inspect.signature shows step(self, closure=None), as torch's
    return wrapper


def _how_to_run(name, foreach=None, differentiable=False, **more):
    """torch's options of how a step runs, checked as torch checks them and kept in the groups
    as torch keeps them. kael runs one path whatever they say (its fused step where the
    parameters allow, docs/decisions/nn-optim-data.md); only differentiable=True, a step that autograd
    records, is refused."""
    if more.get("fused") and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if differentiable:
        raise ValueError(f"{name}: differentiable=True (a step that autograd records) is not supported by kael")
    return dict(foreach=foreach, differentiable=differentiable, **more)


class _ParamState(dict):
    """The per-parameter state: keyed by id(parameter), and indexable by the parameter itself
    (opt.state[p], p in opt.state) as torch's."""

    @staticmethod
    def _key(key):
        return id(key) if isinstance(key, kael.Tensor) else key

    def __getitem__(self, key):
        return super().__getitem__(self._key(key))

    def __setitem__(self, key, value):
        super().__setitem__(self._key(key), value)

    def __delitem__(self, key):
        super().__delitem__(self._key(key))

    def __contains__(self, key):
        return super().__contains__(self._key(key))

    def get(self, key, default=None):
        return super().get(self._key(key), default)


class Optimizer:
    """Base class: holds param_groups (dicts with 'params' and the options) and state, a dict
    from each parameter object to its state (momentum buffers, moments, step count).

    Updates are in-place ops under no_grad, so they bump the parameters' version counters: a graph
    that saved a parameter before the step fails loudly if it is used afterwards.
    state_dict() numbers the parameters by their position across the groups, as PyTorch does;
    load_state_dict() checks that the groups have the same sizes and that every state tensor has
    its parameter's shape, so states are never silently attached to the wrong parameters.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = _ParamState()
        self.param_groups = []
        if isinstance(params, kael.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Adds a group of parameters with its own options (missing options take the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, kael.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for param in params:
            if not isinstance(param, kael.Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(param).__name__}")
            if not getattr(param, "is_leaf", True):
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        seen = set()
        for other in self.param_groups:
            seen.update(id(p) for p in other["params"])
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        """Drops (set_to_none) or zeroes the gradient of every parameter."""
        for group in self.param_groups:
            for param in group["params"]:
                grad = getattr(param, "grad", None)
                if grad is None:
                    continue
                if set_to_none:
                    param.grad = None
                else:
                    grad.zero_()

    def _state_of(self, param):
        key = id(param)
        entry = self.state.get(key)
        if entry is None:
            entry = {}
            self.state[key] = entry
        return entry

    def step(self, closure=None):
        raise NotImplementedError

    def _each_param(self, group, init):
        """(param, grad, state) for each parameter of group that has a gradient: its state begun as
        {"step": 0, **init(param)} when empty, the step counted, the gradient negated when the
        group maximizes."""
        for param in group["params"]:
            grad = getattr(param, "grad", None)
            if grad is None:
                continue
            state = self._state_of(param)
            if not state:
                state["step"] = 0
                state.update(init(param))
            state["step"] += 1
            if group.get("maximize"):
                grad = -grad
            yield param, grad, state

    # ------------------------------------------------------------ state_dict

    def state_dict(self):
        """{'state': {index: {name: value}}, 'param_groups': [{option: value, 'params': [index]}]}
        with indices numbering the parameters across groups in order."""
        index = 0
        groups = []
        state = {}
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            indices = []
            for param in group["params"]:
                entry = self.state.get(id(param))
                if entry:
                    state[index] = {k: (kael.Tensor(v) if isinstance(v, kael.Tensor) else v) for k, v in entry.items()}
                indices.append(index)
                index += 1
            packed["params"] = indices
            groups.append(packed)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores options and per-parameter state from state_dict (copies of its tensors, cast
        to each parameter's dtype). Every check runs before anything changes."""
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group, saved in zip(groups, saved_groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        by_index = {}
        for group, saved in zip(groups, saved_groups):
            for param, index in zip(group["params"], saved["params"]):
                by_index[index] = param
        saved_state = state_dict["state"]
        for index, entry in saved_state.items():
            if index not in by_index:
                raise ValueError(f"loaded state dict has state for parameter {index}, which is in no group")
            param = by_index[index]
            for name, value in entry.items():
                if isinstance(value, kael.Tensor) and value.dim() > 0 and tuple(value.shape) != tuple(param.shape):
                    raise ValueError(f"loaded state dict has state {name!r} of shape {list(value.shape)} for "
                                     f"parameter {index} of shape {list(param.shape)}")
        self.state = _ParamState()
        for index, entry in saved_state.items():
            param = by_index[index]
            restored = {}
            for name, value in entry.items():
                if isinstance(value, kael.Tensor):
                    value = value.to(dtype=param.dtype) if value.is_floating_point() else value
                    value = value.clone()
                else:
                    value = copy.deepcopy(value)
                restored[name] = value
            self.state[id(param)] = restored
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            # options a state dict of an older kael lacks take their defaults
            merged = {k: copy.deepcopy(v) for k, v in self.defaults.items() if k not in saved}
            merged.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})
            merged["params"] = group["params"]
            new_groups.append(merged)
        self.param_groups = new_groups

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += "\n" + f"Parameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    text += "\n" + f"    {key}: {group[key]}"
        return text + "\n)"
