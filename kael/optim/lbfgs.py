"""L-BFGS, as torch.optim.LBFGS: a quasi-Newton method over all parameters flattened into one
vector, with an optional strong-Wolfe line search; step(closure) re-evaluates the loss."""
import kael
from kael.optim.optimizer import Optimizer


def _cubic_minimum(a, b, bounds=None):
    """The minimiser of the cubic through two points (t, f, gtd) of a line, within bounds (by
    default the interval between them): the midpoint where the cubic has no real minimum (or a
    loss or slope is NaN)."""
    (t1, f1, g1), (t2, f2, g2) = a, b
    lo, hi = bounds if bounds is not None else (min(t1, t2), max(t1, t2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (t1 - t2)
    disc = d1 * d1 - g1 * g2
    if not disc >= 0:
        return (lo + hi) / 2
    d2 = disc ** 0.5
    if t1 <= t2:
        t = t2 - (t2 - t1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        t = t1 - (t1 - t2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(t, lo), hi)


class _Point:
    """A trial step t along the direction: the loss there, its flat gradient and the slope."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd

    def cubic(self):
        return self.t, self.f, self.gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d that satisfies the strong Wolfe conditions (sufficient decrease with c1,
    curvature with c2), found by bracketing and then zooming with cubic interpolation, at most
    max_ls evaluations after the first. Returns (loss, flat gradient, t, evaluations)."""
    d_norm = float(d.abs().max())
    start = _Point(0.0, f, g.clone(), gtd)
    f_new, g_new = evaluate(t, d)
    evals = 1
    new = _Point(t, f_new, g_new, float(g_new.dot(d)))
    prev = start
    ls_iter = 0
    bracket = None
    done = False
    # bracketing: grow the step until an interval holds a point that meets the conditions
    while ls_iter < max_ls:
        if new.f > f + c1 * new.t * gtd or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, _Point(new.t, new.f, new.g.clone(), new.gtd)]
            break
        if abs(new.gtd) <= -c2 * gtd:
            bracket = [new]
            done = True
            break
        if new.gtd >= 0:  # past a minimum along d
            bracket = [prev, _Point(new.t, new.f, new.g.clone(), new.gtd)]
            break
        t_next = _cubic_minimum(prev.cubic(), new.cubic(), bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev = _Point(new.t, new.f, new.g.clone(), new.gtd)
        f_new, g_new = evaluate(t_next, d)
        evals += 1
        new = _Point(t_next, f_new, g_new, float(g_new.dot(d)))
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = [start, new]
    # zoom: shrink the bracket around a point that meets the conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    while not done and ls_iter < max_ls:
        lo_t, hi_t = min(bracket[0].t, bracket[1].t), max(bracket[0].t, bracket[1].t)
        if (hi_t - lo_t) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0].cubic(), bracket[1].cubic())
        # a step too close to an end of the bracket is moved a tenth of its width inside, unless
        # the previous step was too close but inside (then it is allowed once)
        margin = 0.1 * (hi_t - lo_t)
        if min(hi_t - t, t - lo_t) < margin:
            if insufficient_progress or t >= hi_t or t <= lo_t:
                t = hi_t - margin if abs(t - hi_t) < abs(t - lo_t) else lo_t + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t, d)
        evals += 1
        new = _Point(t, f_new, g_new.clone(), float(g_new.dot(d)))
        ls_iter += 1
        if new.f > f + c1 * t * gtd or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(new.gtd) <= -c2 * gtd:
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    best = bracket[low] if len(bracket) > 1 else bracket[0]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """PyTorch's L-BFGS. One parameter group; every step runs up to max_iter iterations (and
    max_eval evaluations of the closure), each a direction from the two-loop recursion over the
    last history_size curvature pairs and a step of lr (the first lr / |g|_1, at most lr) or, with
    line_search_fn='strong_wolfe', one found by a strong-Wolfe line search. Stops early when the
    largest gradient entry falls to tolerance_grad, or a step or the loss change falls below
    tolerance_change."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(lr, kael.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(p.new_zeros(p.numel()))
            else:
                parts.append(p.grad.reshape(-1))
        return kael.cat(parts, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=step_size)
            offset += numel
        assert offset == self._numel()

    def _evaluate_at(self, closure, start, t, d):
        """The loss and flat gradient at start + t d (the parameters put back to start after)."""
        self._add_grad(t, d)
        with kael.enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, start):
            p.copy_(saved)
        return loss, flat_grad

    def step(self, closure):
        """Runs up to max_iter iterations; closure() must clear the gradients, compute the loss,
        backpropagate and return it. Returns the loss of the first evaluation."""
        with kael.no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        # the state lives with the first parameter, as torch keeps it
        state = self._state_of(self._params[0])
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with kael.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if float(flat_grad.abs().max()) <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # the direction
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = float(y.dot(s))
                if ys > 1e-10:  # a curvature pair only where the curvature is positive
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y.dot(y))
                # the two-loop recursion: d = -H g with H the L-BFGS inverse Hessian
                count = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(count - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q)) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q.mul(H_diag)
                for i in range(count):
                    be_i = float(old_dirs[i].dot(r)) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)
            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tolerance_change:  # not a descent direction
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                start = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda step, direction: self._evaluate_at(closure, start, step, direction),
                    t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # re-evaluate unless this was the last iteration
                    with kael.enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(flat_grad.abs().max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(d.abs().max()) * abs(t) <= tolerance_change:  # the step is too small
                break
            if abs(loss - prev_loss) < tolerance_change:  # the loss no longer changes
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
