"""kael.nn.Parameter: a tensor that a Module registers as trainable state."""
import kael


class Parameter(kael.Tensor):
    """A kael.Tensor subclass that Module.__setattr__ registers in _parameters.

    It shares the storage of data and is a leaf (kael.Tensor(data) detaches). Because the
    tensor's impl keeps a back-pointer to its Python object, in-place ops and other round trips
    through C++ that return the same impl return this Parameter object itself.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = kael.empty(0)
        if not isinstance(data, kael.Tensor):
            raise TypeError(f"Parameter(): expected a Tensor as data, got {type(data).__name__}")
        return super().__new__(cls, data)

    def __init__(self, data=None, requires_grad=True):
        super().__init__()
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        # as torch's Parameter: a new Parameter of a copy of the data with the same
        # requires_grad; the grad and the instance __dict__ are not copied
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        return result
