"""The generation engine of kael.serve: a model directory loaded, and one scheduler thread that
owns the GPT's Decoder (Note [GPT] and Note [Decoder] in libs/gpt/include/kael/gpt/gpt.h).

Note [Continuous batching]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Requests arrive on the event loop; each prompt of a request is a Sequence. submit() puts the
sequences in a FIFO queue (bounded by max_queue: QueueFull beyond it) and wakes the scheduler
thread; nothing there waits on the model. The scheduler thread alone touches the Decoder, in a
loop: drop the sequences whose requests were cancelled (Decoder.remove), move queued sequences
into free slots (Decoder.add), run one step (Decoder.step, which releases the GIL, so the event
loop keeps answering), and turn each slot's token into text. A step runs at most prefill_rows
rows: one for every running sequence, which so draws a token at every step, and the rest for
the prompts of new sequences, oldest first (Note [Prefill budget] in libs/gpt/src/decoder.cpp).
A long prompt is so prefilled over several steps instead of stalling the running streams for
one long step; a new sequence's first token comes with the step that runs its last prompt row.
A finished sequence leaves its slot at once and the next queued one takes it at the next step.
What a step produced for a request goes back to the event loop in one call_soon_threadsafe, as
a list of Updates on the request's asyncio.Queue.

Text: each sequence decodes its tokens' bytes with an incremental UTF-8 decoder (errors
"replace"), so a piece never ends inside a character and the whole text equals the tokenizer's
decode(ids, errors="replace") of the tokens. The end-of-text token, when the vocabulary has
one, is a stop token whose text is not part of the completion. Stop strings are searched in the
text as it grows; the text is cut before the first one found and the sequence removed. While a
sequence runs, the end of its text that could still be the start of a stop string is held back,
so a streamed client never receives text that a stop string later takes away.

Sampling follows generate(): a sequence with seed S and stream i draws from the Philox stream
(S, i), so prompt i of a request gives the tokens of row i of GPT.generate(prompts, seed=S),
alone or batched with other requests.
"""
from __future__ import annotations

import codecs
import collections
import dataclasses
import logging
import os
import threading
import time

import kael
from kael import _C

__all__ = ["PREFILL_ROWS", "Engine", "QueueFull", "Sequence", "Unavailable", "Update", "load_model"]

log = logging.getLogger("kael.serve")

END_OF_TEXT = "<|endoftext|>"
# The rows a decoder step runs at most (docs/performance.md, "Serving": the inter-token latency
# of running streams while long prompts arrive, against the time to a first token).
PREFILL_ROWS = 128


class QueueFull(Exception):
    """The queue holds max_queue sequences: the request is refused (HTTP 429)."""


class Unavailable(Exception):
    """The engine is stopping, or its scheduler thread failed: the request is refused (HTTP 503)."""


def load_model(model_dir):
    """(GPT in eval mode, BpeTokenizer) from a model directory: GPT.save_pretrained's files and
    the tokenizer, tokenizer.tiktoken (as BpeTokenizer.save writes it, special tokens beside it)
    or Hugging Face's vocab.json + merges.txt. ValueError for a tokenizer whose ids do not fit
    the model's vocabulary."""
    model = kael.GPT.from_pretrained(model_dir).eval()
    tiktoken_path = os.path.join(model_dir, "tokenizer.tiktoken")
    vocab, merges = os.path.join(model_dir, "vocab.json"), os.path.join(model_dir, "merges.txt")
    if os.path.exists(tiktoken_path):
        tokenizer = kael.BpeTokenizer.from_tiktoken(tiktoken_path)
    elif os.path.exists(vocab) and os.path.exists(merges):
        tokenizer = kael.BpeTokenizer.from_vocab_merges(vocab, merges)
    else:
        raise FileNotFoundError(f"kael.serve: no tokenizer in '{model_dir}' (expected tokenizer.tiktoken, or "
                                "vocab.json and merges.txt)")
    if len(tokenizer) > model.config.vocab_size:
        raise ValueError(f"kael.serve: the tokenizer has {len(tokenizer)} tokens, the model's vocabulary "
                         f"{model.config.vocab_size}")
    return model, tokenizer


@dataclasses.dataclass
class Update:
    """What one step produced for one sequence: text to send (possibly empty), the number of
    tokens generated so far, and the finish reason once it ended ("stop", "length", or
    "cancelled"/"error" which the API turns into errors)."""

    index: int
    text: str
    completion_tokens: int
    finish_reason: str | None = None
    error: str | None = None


class Sequence:
    """One prompt of a request, from the queue to its end. Its fields after submit() belong to
    the scheduler thread."""

    def __init__(self, index, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop):
        self.index = index
        self.prompt_ids = list(prompt_ids)
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_k, self.top_p, self.seed = temperature, top_k, top_p, seed
        self.stop = tuple(s for s in stop if s)
        self._longest_stop = max((len(s) for s in self.stop), default=0)
        self.request = None  # the Request it belongs to
        self.slot = None
        self.tokens = 0
        self.text = ""
        self._sent = 0  # characters of text already handed out
        self._checked = 0  # characters of text already searched for stop strings
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.finish_reason = None
        self._last_time = None

    def _held_back(self):
        """Characters at the end of text that could begin a stop string."""
        held = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self.text)), held, -1):
                if self.text.endswith(s[:k]):
                    held = k
                    break
        return held

    def _take(self, piece, finished):
        """Adds a token's text; returns the finish reason if a stop string ended the sequence."""
        self.text += piece
        if self.stop:
            start = max(0, self._checked - self._longest_stop + 1)
            cut = min((p for p in (self.text.find(s, start) for s in self.stop) if p >= 0), default=-1)
            self._checked = len(self.text)
            if cut >= 0:
                self.text = self.text[:cut]
                return "stop"
        return None

    def _pending_text(self):
        end = len(self.text) if self.finish_reason else len(self.text) - self._held_back()
        piece = self.text[self._sent:end]
        self._sent = max(self._sent, end)
        return piece


class Request:
    """A request's sequences and the way back to its event loop."""

    def __init__(self, sequences, loop, queue):
        self.sequences = sequences
        self.loop = loop
        self.queue = queue  # asyncio.Queue of lists of Updates
        self.cancelled = False
        self.submitted = time.perf_counter()
        self.first_token = None
        for s in sequences:
            s.request = self


class Engine:
    """The model, its tokenizer and the scheduler thread (Note [Continuous batching]).

    start() starts the thread; submit() queues a request's sequences; cancel() drops a
    request (queued or running); stop() cancels everything and joins the thread.
    """

    def __init__(self, model, tokenizer, max_batch=8, max_queue=64, metrics=None, prefill_rows=PREFILL_ROWS):
        self.model = model
        self.tokenizer = tokenizer
        self.config = model.config
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.prefill_rows = prefill_rows
        self.metrics = metrics
        eot = tokenizer.special_tokens.get(END_OF_TEXT)
        self.end_of_text = eot if eot is not None and eot < self.config.vocab_size else None
        self.stop_tokens = [self.end_of_text] if self.end_of_text is not None else []
        named = dict(model.named_parameters())
        params = [named[name] for name, _ in _C._gpt_parameters(self.config._tuple())]
        self._decoder = _C._GptDecoder(self.config._tuple(), params, max_batch)
        self._cv = threading.Condition()
        self._queue = collections.deque()  # Sequences waiting for a slot
        self._stopping = False
        self._slots = {}  # slot -> Sequence; the scheduler thread's
        self._active = 0
        self._thread = None
        self.steps = 0
        self.failure = None  # why the scheduler thread ended, if it failed

    # ---------------------------------------------------------------- the event loop's side

    def start(self):
        self._thread = threading.Thread(target=self._run, name="kael-serve-scheduler", daemon=True)
        self._thread.start()

    def queue_depth(self):
        return len(self._queue)

    def active(self):
        return self._active

    def healthy(self):
        """Whether requests can be served: the scheduler thread runs and is not stopping."""
        return self.failure is None and not self._stopping and self._thread is not None and self._thread.is_alive()

    def submit(self, request):
        """Queues the request's sequences; QueueFull when that would exceed max_queue."""
        with self._cv:
            if self._stopping:
                raise Unavailable(self.failure or "the server is shutting down")
            if len(self._queue) + len(request.sequences) > self.max_queue:
                raise QueueFull(f"{len(self._queue)} sequences are waiting (at most {self.max_queue})")
            self._queue.extend(request.sequences)
            self._cv.notify()

    def cancel(self, request):
        """Drops a request: its queued sequences at once, its running ones at the next step."""
        with self._cv:
            if request.cancelled:
                return
            request.cancelled = True
            queued = [s for s in request.sequences if s.slot is None and s.finish_reason is None]
            for s in queued:
                try:
                    self._queue.remove(s)
                except ValueError:
                    continue  # taken by the scheduler thread just now: it sees the flag
                s.finish_reason = "cancelled"
                if self.metrics:
                    self.metrics.finished.inc(reason="cancelled")
            self._cv.notify()

    def stop(self, timeout=30.0):
        """Cancels every request (each gets a final "cancelled" update) and joins the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    # ---------------------------------------------------------------- the scheduler thread

    def _run(self):
        try:
            while self._loop_once():
                pass
        except BaseException as e:  # noqa: BLE001 -- a bug here must not leave requests hanging
            log.exception("kael.serve: the scheduler thread failed")
            self.failure = f"the scheduler failed: {type(e).__name__}: {e}"
            self._fail_all("internal error in the scheduler")  # the thread ends here, logged above

    def _loop_once(self):
        out = collections.defaultdict(list)  # Request -> [Update]
        # the cancelled requests leave first, so that their slots go to the queue in this step
        for slot, seq in list(self._slots.items()):
            if seq.request.cancelled:
                self._decoder.remove(slot)
                del self._slots[slot]
                self._end(seq, "cancelled", out)
        with self._cv:
            # asleep only with nothing to run, nothing to admit and nothing to hand back
            while not (self._slots or self._stopping or out or (self._queue and len(self._slots) < self.max_batch)):
                self._cv.wait()
            if self._stopping:
                queued = list(self._queue)
                self._queue.clear()
            else:
                queued = []
                while self._queue and len(self._slots) + len(queued) < self.max_batch:
                    queued.append(self._queue.popleft())
        if self._stopping:
            for seq in queued + list(self._slots.values()):
                self._end(seq, "cancelled", out)
            self._slots.clear()
            self._active = 0
            self._deliver(out)
            return False
        for seq in queued:
            if seq.request.cancelled:
                self._end(seq, "cancelled", out)
                continue
            try:
                seq.slot = self._decoder.add(seq.prompt_ids, seq.temperature, seq.top_k, seq.top_p, seq.seed,
                                             self.stop_tokens, seq.max_new_tokens, seq.index)
            except (TypeError, ValueError) as e:  # the API checks everything first: a bug if it happens
                log.error("kael.serve: Decoder.add refused a sequence: %s", e)
                self._end(seq, "error", out, error=str(e))
                continue
            self._slots[seq.slot] = seq
            if self.metrics:
                self.metrics.prompt_tokens.inc(len(seq.prompt_ids))
        self._active = len(self._slots)
        if self._slots:
            start = time.perf_counter()
            events = self._decoder.step(self.prefill_rows)  # the GIL is released while the step runs
            self.steps += 1
            now = time.perf_counter()
            if self.metrics:
                self.metrics.step_sequences.observe(len(self._slots))
                self.metrics.step_seconds.observe(now - start)
            for slot, token, finished in events:
                seq = self._slots.get(slot)
                if seq is not None:
                    self._on_token(seq, token, finished, now, out)
            self._active = len(self._slots)
        self._deliver(out)
        return True

    def _on_token(self, seq, token, finished, now, out):
        metrics = self.metrics
        if token >= 0:
            seq.tokens += 1
            if metrics:
                metrics.generated_tokens.inc()
                if seq._last_time is None:
                    metrics.ttft.observe(now - seq.request.submitted)
                else:
                    metrics.inter_token.observe(now - seq._last_time)
            seq._last_time = now
            if seq.request.first_token is None:
                seq.request.first_token = now
        is_stop_token = token >= 0 and token == self.end_of_text
        data = b"" if is_stop_token or token < 0 else self.tokenizer.decode_bytes([token])
        piece = seq._utf8.decode(data, final=finished)
        reason = seq._take(piece, finished)
        if reason is None and finished:
            reason = "stop" if is_stop_token else "length"
        if reason is not None:
            if not finished:  # a stop string: the Decoder still runs it
                self._decoder.remove(seq.slot)
            del self._slots[seq.slot]
            self._end(seq, reason, out)
        else:
            out[seq.request].append(Update(seq.index, seq._pending_text(), seq.tokens))

    def _end(self, seq, reason, out, error=None):
        seq.finish_reason = reason
        seq.slot = None
        if self.metrics:
            self.metrics.finished.inc(reason=reason)
        out[seq.request].append(Update(seq.index, seq._pending_text(), seq.tokens, reason, error))

    def _deliver(self, out):
        for request, updates in out.items():
            try:
                request.loop.call_soon_threadsafe(request.queue.put_nowait, updates)
            except RuntimeError:  # the loop is closed: nobody waits for these
                pass

    def _fail_all(self, message):
        out = collections.defaultdict(list)
        with self._cv:
            self._stopping = True
            queued = list(self._queue)
            self._queue.clear()
        for seq in queued + list(self._slots.values()):
            self._end(seq, "error", out, error=message)
        self._slots.clear()
        self._deliver(out)
