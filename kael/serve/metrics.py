"""The server's metrics in Prometheus's text exposition format (version 0.0.4), without a client
library: counters, gauges read when scraped, and cumulative histograms, each guarded by one lock
because the scheduler thread and the event loop both record (docs/decisions/serving.md).

>>> m = Metrics()
>>> m.generated_tokens.inc(3)
>>> "kael_serve_generated_tokens_total 3" in m.render()
True
"""
from __future__ import annotations

import bisect
import math
import threading

__all__ = ["Metrics"]


def _number(value):
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(pairs):
    if not pairs:
        return ""
    escaped = (str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for _, v in pairs)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, escaped)) + "}"


class Counter:
    def __init__(self, name, help, labelnames=()):
        self.name, self.help, self.labelnames = name, help, tuple(labelnames)
        self._lock = threading.Lock()
        self._values = {} if labelnames else {(): 0}

    def inc(self, amount=1, **labels):
        key = tuple(labels[n] for n in self.labelnames)
        with self._lock:
            self._values[key] = self._values.get(key, 0) + amount

    def value(self, **labels):
        with self._lock:
            return self._values.get(tuple(labels[n] for n in self.labelnames), 0)

    def render(self):
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        with self._lock:
            items = sorted(self._values.items())
        for key, v in items:
            lines.append(f"{self.name}{_labels(list(zip(self.labelnames, key)))} {_number(v)}")
        return lines


class Gauge:
    """A value read from a callback when scraped (the queue depth is the scheduler's own)."""

    def __init__(self, name, help, read):
        self.name, self.help, self._read = name, help, read

    def render(self):
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge", f"{self.name} {_number(self._read())}"]


class Histogram:
    def __init__(self, name, help, buckets):
        self.name, self.help = name, help
        self._bounds = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._counts = [0] * (len(self._bounds) + 1)  # the last: above every bound
        self._sum = 0.0
        self._count = 0

    def observe(self, value):
        i = bisect.bisect_left(self._bounds, value)  # le: a value equal to a bound falls in it
        with self._lock:
            self._counts[i] += 1
            self._sum += value
            self._count += 1

    def render(self):
        with self._lock:
            counts, total, n = list(self._counts), self._sum, self._count
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for bound, c in zip(self._bounds + (math.inf,), counts):
            cumulative += c
            lines.append(f'{self.name}_bucket{{le="{_number(float(bound))}"}} {cumulative}')
        lines.append(f"{self.name}_sum {_number(total)}")
        lines.append(f"{self.name}_count {n}")
        return lines


_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The server's metrics; queue depth and active sequences come from the scheduler when scraped."""

    def __init__(self, queue_depth=lambda: 0, active=lambda: 0):
        self.requests = Counter("kael_serve_requests_total", "HTTP requests answered, by route and status code.",
                                ("route", "status"))
        self.prompt_tokens = Counter("kael_serve_prompt_tokens_total", "Prompt tokens admitted for generation.")
        self.generated_tokens = Counter("kael_serve_generated_tokens_total", "Tokens generated.")
        self.finished = Counter("kael_serve_sequences_finished_total",
                                "Sequences ended, by reason (stop, length, cancelled, error).", ("reason",))
        self.ttft = Histogram("kael_serve_time_to_first_token_seconds",
                              "From a request's admission to the queue to its first generated token.",
                              _LATENCY_BUCKETS)
        self.inter_token = Histogram("kael_serve_inter_token_latency_seconds",
                                     "Between a sequence's consecutive generated tokens.", _LATENCY_BUCKETS)
        self.step_sequences = Histogram("kael_serve_step_sequences", "Sequences in each decoder step (the batch).",
                                        (1, 2, 4, 8, 16, 32, 64, 128))
        self.step_seconds = Histogram("kael_serve_step_seconds", "Duration of each decoder step (prefill included).",
                                      _LATENCY_BUCKETS)
        self._all = (self.requests, self.prompt_tokens, self.generated_tokens, self.finished,
                     Gauge("kael_serve_queue_depth", "Sequences waiting for a decoder slot.", queue_depth),
                     Gauge("kael_serve_active_sequences", "Sequences in the decoder's slots.", active),
                     self.ttft, self.inter_token, self.step_sequences, self.step_seconds)

    def render(self):
        lines = []
        for metric in self._all:
            lines.extend(metric.render())
        return "\n".join(lines) + "\n"
