"""kael.nn.Module: the base class of layers, with PyTorch's registration rules."""
from collections import OrderedDict
from collections.abc import Mapping

import kael
from kael.nn._grad import no_grad
from kael.nn.parameter import Parameter


class RemovableHandle:
    """Returned by register_forward_hook/register_forward_pre_hook; remove() unregisters the hook."""

    _next_id = 0

    def __init__(self, table):
        self._table = table
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        self._table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.remove()
        return False


def _typename(obj):
    """torch.typename's spelling: module.qualname of the object's type (builtins bare)."""
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of every layer: subclasses call super().__init__() and define forward().

    As in torch, parameters, buffers and child modules live only in their tables (_parameters,
    _buffers, _modules; __getattr__ reads them), never in the instance __dict__: assigning a
    Parameter registers it, a Module adds a child, and assigning to a name already registered
    replaces the value in place, so the tables keep their order. A registered parameter takes
    only a Parameter or None (TypeError otherwise), a child only a Module or None, a buffer a
    tensor or None (it stays a buffer, persistent or not as before).
    """

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    # ------------------------------------------------------------ registration

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            values = d.get(table)
            if values is not None and name in values:
                return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if params is None and isinstance(value, (Parameter, Module)):
            raise AttributeError(
                f"cannot assign attribute {name!r} before Module.__init__() call: "
                "call super().__init__() before assigning attributes")

        def remove_from(*tables):
            for table in tables:
                if isinstance(table, dict):
                    table.pop(name, None)
                else:
                    table.discard(name)

        if isinstance(value, Parameter):
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(kael.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(kael.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, kael.Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(kael.Tensor or None expected)")
                    self.register_buffer(name, value, name not in self._non_persistent_buffers)
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name, param):
        """Registers param (a Parameter or None) under name."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(kael.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                             "the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Registers tensor (a kael.Tensor or None) as non-trainable state; persistent buffers are
        part of state_dict()."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, kael.Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(kael.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        """Registers module (a Module or None) as a child under name."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')

    def get_submodule(self, target):
        module = self
        if target == "":
            return module
        for item in target.split("."):
            if item not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no attribute `{item}`")
            module = module._modules[item]
        return module

    # ------------------------------------------------------------ traversal

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module and every descendant, each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub_prefix, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, table, prefix, recurse, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) pairs; a parameter shared by several modules appears once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, parameter in self.named_parameters(recurse=recurse):
            yield parameter

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    # ------------------------------------------------------------ state

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict from dotted names to the parameters and persistent buffers (detached
        tensors sharing their storage unless keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else kael.Tensor(param)
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = buffer if keep_vars else kael.Tensor(buffer)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def _state_entries(self):
        entries = OrderedDict()
        for prefix, module in self.named_modules(remove_duplicate=False):
            base = prefix + "." if prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    entries[base + name] = param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers:
                    entries[base + name] = buffer
        return entries

    def _unexpected_keys(self, keys):
        """The keys that name no parameter or persistent buffer, in torch's order: module by
        module (this one first, then its children depth-first), each in the order of keys."""
        out = []
        for prefix, module in self.named_modules(remove_duplicate=False):
            base = prefix + "." if prefix else ""
            local = {name for name, p in module._parameters.items() if p is not None}
            local |= {name for name, b in module._buffers.items()
                      if b is not None and name not in module._non_persistent_buffers}
            for key in keys:
                if not key.startswith(base):
                    continue
                head, dot, _ = key[len(base):].partition(".")
                if (head not in module._modules) if dot else (head not in local):
                    out.append(key)
        return out

    def save(self, path, metadata=None):
        """Writes state_dict() to path as a safetensors file (kael.save_safetensors), with
        metadata (a dict of str to str) in its header."""
        import kael
        kael.save_safetensors(self.state_dict(), path, metadata)

    def load(self, path, strict=True, mmap=False):
        """Loads a safetensors file written by save() (or by the safetensors package) into the
        parameters and buffers in place, as load_state_dict(kael.load_safetensors(path), strict)."""
        import kael
        return self.load_state_dict(kael.load_safetensors(path, mmap=mmap), strict=strict)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies the tensors of state_dict into the parameters and buffers in place.

        Every check runs before the first copy: a key of the module missing from state_dict
        raises KeyError (strict), an unexpected key KeyError (strict), a shape mismatch or a
        value that is not a tensor ValueError. Returns (missing_keys, unexpected_keys).
        """
        if assign:
            raise NotImplementedError("load_state_dict: assign=True is not supported")
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected state_dict to be dict-like, got {type(state_dict)}.")
        # One read of every key and value, as torch's OrderedDict(state_dict): a mapping that
        # answers differently on a second read cannot pass the checks with one value and be
        # copied from another.
        state_dict = OrderedDict(state_dict)
        for key in state_dict:
            if not isinstance(key, str):
                raise TypeError(f"load_state_dict: keys must be str, got {key!r} ({type(key).__name__})")
        entries = self._state_entries()
        missing = [key for key in entries if key not in state_dict]
        unexpected = self._unexpected_keys(state_dict)
        if strict and missing:
            raise KeyError(f"load_state_dict: missing key(s) in state_dict: {', '.join(map(repr, missing))}")
        if strict and unexpected:
            raise KeyError(f"load_state_dict: unexpected key(s) in state_dict: {', '.join(map(repr, unexpected))}")
        for key, target in entries.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, kael.Tensor):
                raise ValueError(f"load_state_dict: the value of {key!r} is a {type(value).__name__}, not a tensor")
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(f"load_state_dict: size mismatch for {key!r}: copying a tensor of shape "
                                 f"{list(value.shape)}, the parameter in the current model has shape "
                                 f"{list(target.shape)}")
        with no_grad():
            for key, target in entries.items():
                if key in state_dict:
                    target.copy_(state_dict[key])
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ modes, devices, dtypes

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for parameter in self.parameters():
            parameter.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops (set_to_none) or zeroes the gradients of every parameter."""
        for parameter in self.parameters():
            _zero_grad(parameter, set_to_none)

    def apply(self, fn):
        """Calls fn on every child (recursively), then on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """Moves or converts the floating-point parameters and buffers in place: to(device),
        to(dtype), to(device, dtype) or to(tensor). Parameters keep their identity, so an
        optimizer built before the call keeps updating the same objects; buffers are replaced."""
        memory_format = kwargs.pop("memory_format", None)
        if memory_format is not None and not isinstance(memory_format, kael.memory_format):
            raise TypeError(f"to() expects memory_format to be a kael.memory_format, got {type(memory_format).__name__}")
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not (dtype.is_floating_point if hasattr(dtype, "is_floating_point")
                                      else kael.empty(0, dtype=dtype).is_floating_point()):
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t):
            if memory_format is not None and t.dim() in (4, 5):  # as torch: the layout of 4-D/5-D tensors only
                t = t.to(memory_format=memory_format)
            if t.is_floating_point():
                return t.to(device if device is not None else t.device, dtype)
            return t.to(device) if device is not None else t

        with no_grad():
            for parameter in self.parameters():
                _convert_parameter_(parameter, convert)
            for module in self.modules():
                for name, buffer in list(module._buffers.items()):
                    if buffer is not None:
                        converted = convert(buffer)
                        if converted is not buffer:
                            persistent = name not in module._non_persistent_buffers
                            module.register_buffer(name, converted, persistent)
        return self

    def float(self):
        return self.to(kael.float32)

    def double(self):
        return self.to(kael.float64)

    def half(self):
        return self.to(kael.float16)

    def bfloat16(self):
        return self.to(kael.bfloat16)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    # ------------------------------------------------------------ calling

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a non-None result replaces the args (a
        non-tuple is wrapped in a tuple)."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a non-None result replaces output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def __call__(self, *args, **kwargs):
        if not self._forward_pre_hooks and not self._forward_hooks:
            return self.forward(*args, **kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # ------------------------------------------------------------ repr

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for name, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + name + "): " + mod_str)
        lines = extra_lines + child_lines
        main = type(self).__name__ + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted({key for key in keys if not key[0].isdigit()})


class _IncompatibleKeys(tuple):
    def __new__(cls, missing_keys, unexpected_keys):
        return super().__new__(cls, (missing_keys, unexpected_keys))

    @property
    def missing_keys(self):
        return self[0]

    @property
    def unexpected_keys(self):
        return self[1]

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _zero_grad(parameter, set_to_none):
    grad = getattr(parameter, "grad", None)
    if grad is None:
        return
    if set_to_none:
        parameter.grad = None
    else:
        grad.zero_()


def _parse_to(*args, **kwargs):
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, kael.dtype):
            dtype = arg
        elif isinstance(arg, kael.Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, str) or type(arg).__name__ == "device":
            device = str(arg)
        else:
            raise TypeError(f"to() expects a dtype, a device name or a tensor, got {type(arg).__name__}")
    if device is not None:
        device = str(device)
    return device, dtype


def _convert_parameter_(parameter, convert):
    """Replaces the data of parameter with convert(parameter), keeping the Python object (and with
    it the optimizer's reference); the gradient is converted the same way."""
    converted = convert(parameter)
    same = converted is parameter
    grad = getattr(parameter, "grad", None)
    if not same:
        requires_grad = parameter.requires_grad
        kael._C._set_data_(parameter, converted)
        parameter.requires_grad = requires_grad
    if grad is not None:
        converted_grad = convert(grad)
        if converted_grad is not grad:
            parameter.grad = converted_grad
