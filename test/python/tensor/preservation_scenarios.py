"""PyObject preservation scenarios, run for kael and for torch in a child process each
(test_pyobject_preservation.py compares what they report). A scenario takes the library module
and returns plain Python values describing what it observed.

    python preservation_scenarios.py kael|torch   ->  prints repr({name: result or ("error", text)})
"""
import gc
import sys
import threading
import weakref


def make_sub(lib, cls, data):
    """A `cls` object over data's elements, not a view (torch: _make_subclass; kael: cls(data))."""
    if lib.__name__ == "torch":
        return lib.Tensor._make_subclass(cls, data)
    return cls(data)


def sub_class(lib, name="Sub", **namespace):
    return type(name, (lib.Tensor,), dict(namespace))


def leaf_with_grad(lib):
    x = lib.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    return x


def s_grad_keeps_identity_and_dict(lib):
    x = leaf_with_grad(lib)
    g = x.grad
    g.tag = 1
    ident = id(g)
    del g
    gc.collect()
    return [x.grad.tag, id(x.grad) == ident, x.grad is x.grad, x.grad.tolist()]


def s_grad_subclass_comes_back(lib):
    Sub = sub_class(lib)
    x = lib.ones(2, requires_grad=True)
    s = make_sub(lib, Sub, lib.zeros(2))
    s.note = ["n"]
    x.grad = s
    del s
    gc.collect()
    g = x.grad
    return [type(g).__name__, g.note, g.tolist()]


def s_grad_dies_with_its_impl(lib):
    x = leaf_with_grad(lib)
    g = x.grad
    g.tag = 2
    r = weakref.ref(g)
    calls = []
    weakref.finalize(g, calls.append, "finalized")
    del g
    gc.collect()
    kept = [r() is not None, calls[:]]
    x.grad = None  # the impl's last owner: the object dies with it
    gc.collect()
    return kept + [r() is None, calls]


def s_view_base_keeps_identity(lib):
    Sub = sub_class(lib)
    b = make_sub(lib, Sub, lib.arange(4.0))
    b.tag = "base"
    ident = id(b)
    v = b[1:]
    del b
    gc.collect()
    base = v._base
    return [type(base).__name__, base.tag, id(base) == ident, v._base is v._base, base.tolist()]


def s_parameter_through_autograd_graph(lib):
    Parameter = lib.nn.Parameter
    p = Parameter(lib.ones(2))
    p.tag = "weight"
    ident = id(p)
    y = (p * 2).sum()
    del p
    gc.collect()
    node = y.grad_fn.next_functions[0][0].next_functions[0][0]
    q = node.variable
    return [type(q).__name__, q.tag, id(q) == ident, q.requires_grad, node.variable is q]


def s_saved_tensor_lives_with_the_graph(lib):
    x = lib.ones(2, requires_grad=True)
    w = lib.full((2,), 3.0)
    w.tag = "saved"
    r = weakref.ref(w)
    y = (x * w).sum()
    del w
    gc.collect()
    during = r() is not None and r().tag == "saved"
    y.backward()  # frees the saved tensors (the engine runs without the GIL)
    gc.collect()
    after_backward = r() is None
    del y
    gc.collect()
    return [during, after_backward, r() is None, x.grad.tolist()]


def s_weakref_follows_the_impl(lib):
    t = lib.ones(2)
    r = weakref.ref(t)
    v = t[0:1]
    del t
    gc.collect()
    out = [r() is not None, r() is v._base]
    # a reference taken through the weakref (no flip), dropped again: still kept
    t2 = r()
    del t2
    gc.collect()
    out.append(r() is v._base)
    del v
    gc.collect()
    out.append(r() is None)
    return out


def s_weakref_reference_outlives_the_cpp_owner(lib):
    t = lib.arange(3.0)
    t.tag = "x"
    r = weakref.ref(t)
    v = t[1:]
    del t
    gc.collect()
    held = r()  # Python holds the object again without going through the impl
    del v  # the impl's last C++ owner goes while Python holds the object
    gc.collect()
    out = [held.tolist(), held.tag, r() is held, held._base is None]
    del held
    gc.collect()
    out.append(r() is None)
    return out


def s_refcounts(lib):
    x = leaf_with_grad(lib)
    g = x.grad
    first = sys.getrefcount(g)
    del g
    gc.collect()
    g = x.grad
    again = sys.getrefcount(g)
    del g
    counts = []
    for _ in range(200):
        g = x.grad
        g.n = getattr(g, "n", 0) + 1
        del g
        counts.append(sys.getrefcount(x.grad))
    return [first, again, len(set(counts)), x.grad.n]


def s_no_object_leak_in_a_loop(lib):
    x = leaf_with_grad(lib)
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(300):
        v = x.grad[0:1]
        v._base.k = 1
        del v
        y = lib.ones(3)
        w = y[1:]
        del y
        del w
    gc.collect()
    return [abs(len(gc.get_objects()) - before) < 50]


def s_self_cycle_of_a_plain_tensor_is_collected(lib):
    t = lib.ones(2)
    t.me = t
    r = weakref.ref(t)
    del t
    gc.collect()
    return [r() is None]


def s_self_cycle_of_a_subclass_object_is_collected(lib):
    Sub = sub_class(lib)
    t = make_sub(lib, Sub, lib.ones(2))
    t.me = t
    r = weakref.ref(t)
    del t
    gc.collect()
    return [r() is None]


def s_kept_object_keeps_its_cycle(lib):
    # a subclass object (GC-tracked in both libraries) kept for C++ with a cycle through its
    # __dict__: the collector must not clear that __dict__
    x = lib.ones(2, requires_grad=True)
    x.grad = make_sub(lib, sub_class(lib), lib.zeros(2))
    g = x.grad
    g.me = g
    g.payload = [1, 2]
    del g
    gc.collect()
    gc.collect()
    g = x.grad
    return [g.me is g, g.payload]


def s_kept_plain_object_keeps_its_cycle(lib):
    # the same with a plain tensor (a GC object in both libraries), kept as a .grad, and a cycle
    # through a list in its __dict__ too
    x = lib.ones(2, requires_grad=True)
    x.grad = lib.zeros(2)
    g = x.grad
    g.me = g
    g.box = [g, "payload"]
    del g
    for _ in range(3):
        gc.collect()
    g = x.grad
    return [g.me is g, g.box[0] is g, g.box[1]]


def s_dict_cycles_of_plain_tensors_are_collected(lib):
    # t -> __dict__ -> list -> t; a -> b -> a; and a view whose __dict__ holds its base's
    # object, with the base's __dict__ holding the view
    a, b, t = lib.ones(2), lib.ones(3), lib.ones(4)
    t.box = [t]
    a.other, b.other = b, a
    base = lib.ones(5)
    view = base[1:]
    view.base_obj, base.view_obj = base, view
    refs = [weakref.ref(o) for o in (a, b, t, base, view)]
    del a, b, t, base, view
    gc.collect()
    return [r() is None for r in refs]


def s_cycle_through_a_grad_and_a_dict(lib):
    # x -> C++ .grad -> g -> g.__dict__ -> x, with x and g subclass objects (GC-tracked)
    Sub = sub_class(lib)
    x = make_sub(lib, Sub, lib.ones(2)).requires_grad_()
    x.grad = make_sub(lib, Sub, lib.zeros(2))
    g = x.grad
    g.owner = x
    rx, rg = weakref.ref(x), weakref.ref(g)
    del x, g
    gc.collect()
    return [rx() is None, rg() is None]


def s_cycle_through_a_grad_and_a_dict_plain(lib):
    # the same with a plain leaf
    x = lib.ones(2, requires_grad=True)
    x.grad = lib.zeros(2)
    g = x.grad
    g.owner = x
    rx, rg = weakref.ref(x), weakref.ref(g)
    del x, g
    gc.collect()
    return [rx() is None, rg() is None]


def s_cycle_through_a_view_base(lib):
    # b -> b.__dict__ -> v -> C++ view base -> b, with b a subclass object and a plain tensor
    out = []
    for cls in (sub_class(lib), None):
        b = lib.ones(4) if cls is None else make_sub(lib, cls, lib.ones(4))
        b.view = b[1:]
        rb, rv = weakref.ref(b), weakref.ref(b.view)
        del b
        gc.collect()
        out += [rb() is None, rv() is None]
    return out


def s_slots_and_del(lib):
    calls = []

    def __del__(self):
        calls.append("del")

    Sub = sub_class(lib, "Slotted", __slots__=("extra",), __del__=__del__)
    x = lib.ones(2, requires_grad=True)
    s = make_sub(lib, Sub, lib.zeros(2))
    s.extra = "slot"
    s.tag = "dict"
    x.grad = s
    del s
    gc.collect()
    out = [calls[:], x.grad.extra, x.grad.tag, type(x.grad).__name__]
    x.grad = None
    gc.collect()
    out.append(calls)
    return out


def s_threads_drop_kept_objects(lib):
    # Views made and dropped on several threads while their bases' objects are kept by the
    # views' impls: releases happen on whichever thread drops the last reference.
    errors = []

    def work():
        try:
            for _ in range(200):
                t = lib.ones(4)
                t.tag = 1
                v = t[1:]
                del t
                assert v._base.tag == 1
                del v
        except Exception as e:  # noqa: BLE001 - reported to the parent
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return [errors]


def s_kept_objects_at_exit(lib):
    # Objects still kept by C++ at interpreter exit (module globals of this child process).
    global _KEPT
    x = leaf_with_grad(lib)
    g = x.grad
    g.tag = "exit"
    del g
    v = lib.ones(3)[1:]
    _KEPT = (x, v)
    return [True]


SCENARIOS = {name[2:]: fn for name, fn in list(globals().items()) if name.startswith("s_")}


def run(lib_name):
    import importlib

    lib = importlib.import_module(lib_name)
    if lib_name == "kael":
        import kael.nn  # noqa: F401
    results = {}
    for name, fn in SCENARIOS.items():
        try:
            results[name] = fn(lib)
        except Exception as e:  # noqa: BLE001 - reported to the parent
            results[name] = ("error", f"{type(e).__name__}: {e}")
    return results


if __name__ == "__main__":
    print(repr(run(sys.argv[1])))
