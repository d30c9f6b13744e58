"""kael.BpeTokenizer's arguments whose UTF-8 (or bytes) the C++ side reads must stay alive while it
reads them (Note [Owned UTF-8] in csrc/py_utf8.h): fresh strings from generators, the replacement
strings of lone surrogates, str subclasses, and dict entries whose ids' __index__ empties the dict.

Each case runs in a fresh interpreter (a read of freed memory may crash it) and compares kael with
tiktoken (the oracle, tiktoken==0.14.0) where tiktoken defines the behaviour. The specials hold
non-ASCII characters on purpose: a str's UTF-8 is then a separate allocation that is freed with
the str, and the allocator reuses its first bytes at once, so a read after the free sees other
bytes instead of plausible ones and the exact results below come out wrong.
"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tiktoken  # noqa: E402,F401  (requirements-dev.txt: the oracle of these tests)

SHARED = Path(__file__).resolve().parents[1]  # test/python: gpt2_assets.py

PRELUDE = r'''
import json, sys
sys.path.insert(0, SHARED)
import regex
import tiktoken
import kael
from gpt2_assets import GPT2_PATTERN

RANKS = {bytes([i]): i for i in range(256)}
RANKS[b"ab"] = 256
RANKS["«".encode()] = 257
SPECIALS = {"«zz0»": 300, "«zz1»": 301, "«zz2»": 302, "<|endoftext|>": 303}
tok = kael.BpeTokenizer(RANKS, SPECIALS)
enc = tiktoken.Encoding("lifetimes", pat_str=GPT2_PATTERN, mergeable_ranks=RANKS, special_tokens=SPECIALS)

def outcome(f):
    try:
        return ["ok", f()]
    except Exception as e:
        return ["raises", type(e).__name__, str(e)]

def fresh(n, *, surrogate=False):
    """A generator of strings made for that one step (nothing else refers to them)."""
    for i in range(n):
        yield ("\ud800" if surrogate else "") + "«zz" + str(i) + "»"

results = {}
'''


def run_cases(body):
    """Runs PRELUDE + body in a fresh interpreter; body fills `results` with JSON-able outcomes."""
    code = PRELUDE.replace("SHARED", repr(str(SHARED))) + textwrap.dedent(body) + "\nprint(json.dumps(results))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the interpreter died (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])


def assert_same(results):
    for name, (kael_result, tiktoken_result) in results.items():
        assert kael_result == tiktoken_result, name


# ---------------------------------------------------------------- allowed_special / disallowed_special

def test_special_sets_from_generators_and_lone_surrogates_are_tiktokens():
    results = run_cases('''
        cases = {
            # the report's examples
            "gen_absent": ("abc", {"disallowed_special": lambda: ("zz" + str(i) for i in range(3))}),
            "surrogate_absent": ("abc", {"disallowed_special": lambda: ["\\ud800"]}),
            # a special the generator makes is really disallowed
            "gen_present": ("x«zz1»y", {"disallowed_special": lambda: fresh(3)}),
            "gen_present_batch": (None, {"disallowed_special": lambda: fresh(3)}),
            "gen_other": ("x«zz7»y", {"disallowed_special": lambda: fresh(3)}),
            # a lone surrogate matches itself only, as tiktoken's search of the str
            "surrogate_present": ("a\\ud800b", {"disallowed_special": lambda: ["\\ud800"]}),
            "surrogate_vs_fffd": ("a\\ufffdb", {"disallowed_special": lambda: ["\\ud800"]}),
            "fffd_vs_surrogate": ("a\\ud800b", {"disallowed_special": lambda: ["\\ufffd"]}),
            "surrogate_gen_present": ("x\\ud800«zz2»", {"disallowed_special": lambda: fresh(3, surrogate=True)}),
            "surrogate_gen_absent": ("x«zz2»", {"disallowed_special": lambda: fresh(3, surrogate=True)}),
            "pair_vs_half": ("\\ud83d\\ude00", {"disallowed_special": lambda: ["\\ud83d"]}),
            # "all": every special not allowed; allowed ones from a generator
            "all_but_gen": ("a«zz1»<|endoftext|>", {"allowed_special": lambda: fresh(3),
                                                     "disallowed_special": lambda: ()}),
            "gen_allowed_others_disallowed": ("a«zz1»«zz2»", {"allowed_special": lambda: fresh(3)}),
            "gen_allowed_eot_disallowed": ("a«zz1»<|endoftext|>", {"allowed_special": lambda: fresh(3)}),
            "surrogate_allowed": ("a\\ud800«zz0»", {"allowed_special": lambda: fresh(1, surrogate=True),
                                                    "disallowed_special": lambda: ()}),
        }

        def tiktoken_kwargs(kw):
            # tiktoken's Python layer takes sets: what kael iterates once, it gets as a frozenset.
            return {k: frozenset(v()) for k, v in kw.items()}

        texts = ["x", "«zz0»", "a\\ud800b", "y«zz1»"]
        for name, (text, kw) in cases.items():
            if text is None:
                k = outcome(lambda: tok.encode_batch(texts, **{n: v() for n, v in kw.items()}))
                t = outcome(lambda: enc.encode_batch(texts, **tiktoken_kwargs(kw)))
            else:
                k = outcome(lambda: tok.encode(text, **{n: v() for n, v in kw.items()}))
                t = outcome(lambda: enc.encode(text, **tiktoken_kwargs(kw)))
            results[name] = [k, t]
        ''')
    assert_same(results)
    # the generated special was found, not read from freed memory
    assert results["gen_present"][0][:2] == ["raises", "ValueError"]
    assert "'«zz1»'" in results["gen_present"][0][2]
    assert results["surrogate_present"][0][:2] == ["raises", "ValueError"]
    assert results["surrogate_gen_present"][0][:2] == ["raises", "ValueError"]
    assert results["gen_present_batch"][0][:2] == ["raises", "ValueError"]
    assert results["all_but_gen"][0][0] == "ok" and results["all_but_gen"][0][1][1] == 301
    assert results["surrogate_allowed"][0][:2] == ["raises", "UnicodeEncodeError"]


def test_special_sets_of_str_subclasses():
    results = run_cases('''
        class S(str):
            pass

        def subclassed():
            for i in range(3):
                yield S("«zz" + str(i) + "»")

        results["subclass_disallowed"] = [outcome(lambda: tok.encode("«zz2»", disallowed_special=subclassed())),
                                          outcome(lambda: enc.encode("«zz2»",
                                                                     disallowed_special=frozenset(subclassed())))]
        results["subclass_allowed"] = [outcome(lambda: tok.encode("«zz2»", allowed_special=subclassed())),
                                       outcome(lambda: enc.encode("«zz2»", allowed_special=frozenset(subclassed())))]
        results["subclass_text"] = [outcome(lambda: tok.encode(S("a«zz0»\\ud800"), allowed_special="all")),
                                    outcome(lambda: enc.encode(S("a«zz0»\\ud800"), allowed_special="all"))]
        ''')
    assert_same(results)
    assert results["subclass_allowed"][0] == ["ok", [302]]


# ---------------------------------------------------------------- the texts encoded

def test_texts_with_lone_surrogates_and_subclasses_are_tiktokens():
    results = run_cases('''
        class S(str):
            pass

        texts = ["a\\ud800b", "\\udfff«", "x \\ud83d\\ude00 \\ud83d", S("ab\\udc80«"), S("plain ab")]
        for i, text in enumerate(texts):
            results[f"encode{i}"] = [outcome(lambda: tok.encode(text)), outcome(lambda: enc.encode(text))]
            results[f"ordinary{i}"] = [outcome(lambda: tok.encode_ordinary(text)),
                                       outcome(lambda: enc.encode_ordinary(text))]
            # tiktoken has no pretokenize: its pattern over the text it encodes (surrogates replaced)
            replaced = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            results[f"pretokenize{i}"] = [outcome(lambda: tok.pretokenize(text)),
                                          outcome(lambda: regex.findall(GPT2_PATTERN, replaced))]
        results["batch"] = [outcome(lambda: tok.encode_batch(texts, num_threads=2)),
                            outcome(lambda: enc.encode_batch(texts))]
        results["batch_disallowed"] = [
            outcome(lambda: tok.encode_batch(texts + ["q\\ud800«zz1»"], disallowed_special=fresh(3, surrogate=True))),
            outcome(lambda: enc.encode_batch(texts + ["q\\ud800«zz1»"],
                                             disallowed_special=frozenset(fresh(3, surrogate=True))))]
        ''')
    assert_same(results)
    assert results["batch_disallowed"][0][:2] == ["raises", "ValueError"]


# ---------------------------------------------------------------- special tokens and ranks (dicts)

def test_special_token_names_are_utf8_as_tiktoken_requires():
    results = run_cases('''
        class S(str):
            pass

        for name, specials in [("surrogate", {"\\ud800": 300}), ("pair", {"\\ud83d\\ude00": 300}),
                               ("subclass", {S("«x»"): 300})]:
            k = outcome(lambda: kael.BpeTokenizer(RANKS, specials).special_tokens)
            t = outcome(lambda: tiktoken.Encoding("t", pat_str=GPT2_PATTERN, mergeable_ranks=RANKS,
                                                  special_tokens=specials)._special_tokens)
            results[name] = [k, t]
        results["subclass_encodes"] = [
            outcome(lambda: kael.BpeTokenizer(RANKS, {S("«x»"): 300}).encode("a«x»", allowed_special="all")),
            outcome(lambda: tiktoken.Encoding("t", pat_str=GPT2_PATTERN, mergeable_ranks=RANKS,
                                              special_tokens={S("«x»"): 300}).encode("a«x»", allowed_special="all"))]
        ''')
    assert_same(results)
    assert results["subclass"][0] == ["ok", {"«x»": 300}]
    assert results["surrogate"][0][:2] == ["raises", "UnicodeEncodeError"]


def test_dict_entries_stay_alive_while_their_ids_are_read():
    """An id's __index__ empties the dict it comes from: the key it belongs to would be freed."""
    results = run_cases('''
        class Clears:
            def __init__(self, d, v):
                self.d, self.v = d, v

            def __index__(self):
                self.d.clear()
                return self.v

        def specials():
            d = {}
            d["«zz" + str(9) + "»"] = Clears(d, 300)
            return d

        def ranks():
            r = dict(RANKS)
            r[bytes(bytearray(b"\\xc2\\xab!"))] = Clears(r, 258)
            return r

        results["constructor_specials"] = outcome(lambda: kael.BpeTokenizer(RANKS, specials()).special_tokens)
        results["constructor_ranks"] = outcome(lambda: kael.BpeTokenizer(ranks(), {}).vocab_size)
        import tempfile, os
        with tempfile.TemporaryDirectory() as tmp:
            tok.save(os.path.join(tmp, "t.tiktoken"))
            results["from_tiktoken_specials"] = outcome(
                lambda: kael.BpeTokenizer.from_tiktoken(os.path.join(tmp, "t.tiktoken"), special_tokens=specials())
                .special_tokens)
        # a __index__ that leaves the dict alone: read as usual
        class Index:
            def __index__(self):
                return 300
        results["plain_index"] = outcome(lambda: kael.BpeTokenizer(RANKS, {"«zz" + str(9) + "»": Index()})
                                         .special_tokens)
        ''')
    for name in ("constructor_specials", "constructor_ranks", "from_tiktoken_specials"):
        kind, cls, message = results[name]
        assert (kind, cls) == ("raises", "RuntimeError"), name
        assert message.startswith("BpeTokenizer") and "changed size while it was read" in message, message
    assert results["plain_index"] == ["ok", {"«zz9»": 300}]


def test_trained_and_loaded_special_names_are_utf8():
    results = run_cases('''
        import tempfile, os
        results["train_surrogate_special"] = [
            outcome(lambda: kael.BpeTokenizer.train("abc", 300, special_tokens=["\\ud800"]).special_tokens),
            outcome(lambda: "\\ud800".encode("utf-8"))]
        results["train_generator_texts"] = [
            outcome(lambda: kael.BpeTokenizer.train(fresh(50), 270, special_tokens=["«zz1»"])
                    .encode_batch(["«zz0»", "«zz1»"], disallowed_special=())),
            outcome(lambda: kael.BpeTokenizer.train(list(fresh(50)), 270, special_tokens=["«zz1»"])
                    .encode_batch(["«zz0»", "«zz1»"], disallowed_special=()))]
        replaced = [t.replace("\\ud800", "\\ufffd") for t in fresh(50, surrogate=True)]
        results["train_surrogate_texts"] = [
            outcome(lambda: kael.BpeTokenizer.train(fresh(50, surrogate=True), 270).encode_batch(replaced)),
            outcome(lambda: kael.BpeTokenizer.train(replaced, 270).encode_batch(replaced))]
        with tempfile.TemporaryDirectory() as tmp:
            vocab, merges = os.path.join(tmp, "vocab.json"), os.path.join(tmp, "merges.txt")
            alphabet = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0xAD)] + \\
                [chr(c) for c in range(0xAE, 0x100)] + [chr(0x100 + i) for i in range(68)]
            with open(vocab, "w") as f:
                f.write(json.dumps({**{c: i for i, c in enumerate(alphabet)}, "\\ud800": 256}))
            with open(merges, "w") as f:
                f.write("#version: 0.2\\n")
            results["vocab_surrogate_special"] = [
                outcome(lambda: kael.BpeTokenizer.from_vocab_merges(vocab, merges).special_tokens),
                outcome(lambda: "\\ud800".encode("utf-8"))]
        ''')
    assert_same(results)
    assert results["train_generator_texts"][0][0] == "ok"
    assert results["train_surrogate_special"][0][:2] == ["raises", "UnicodeEncodeError"]


# ---------------------------------------------------------------- lookups and decoding

def test_token_to_id_and_decode_arguments():
    results = run_cases('''
        class S(str):
            pass

        class B(bytes):
            pass

        for name, token in [("surrogate", "\\ud800"), ("subclass", S("«")), ("bytes_subclass", B("«".encode())),
                            ("fresh", "".join(["a", "b"]))]:
            results[name] = [outcome(lambda: tok.token_to_id(token)), outcome(lambda: enc.encode_single_token(token))]

        class Mutating:
            """An id whose __index__ empties the list it is read from."""
            def __init__(self, ids):
                self.ids = ids

            def __index__(self):
                self.ids.clear()
                return 257

        def ids():
            l = [97, 0, 98]
            l[1] = Mutating(l)
            return l

        results["decode_errors_kw"] = [outcome(lambda: tok.decode(ids(), **{"errors": "".join(["re", "place"])})),
                                       ["ok", "a«"]]
        results["decode_errors_surrogate"] = [outcome(lambda: tok.decode([97], errors="\\ud800")),
                                              outcome(lambda: b"a".decode("utf-8", "\\ud800"))]
        results["decode_errors_nul"] = [outcome(lambda: tok.decode([97, 255], errors="strict\\0")),
                                        outcome(lambda: b"a\\xff".decode("utf-8", "strict\\0"))]
        ''')
    # bytes.decode says "embedded null character" without a name: the classes agree
    nul = results.pop("decode_errors_nul")
    assert nul[0][:2] == nul[1][:2] == ["raises", "ValueError"]
    assert nul[0][2] == "BpeTokenizer.decode: errors holds an embedded null character"
    assert_same(results)
    assert results["surrogate"][0][:2] == ["raises", "UnicodeEncodeError"]
    assert results["subclass"][0] == ["ok", 257]


# ---------------------------------------------------------------- the other csrc/ sites of the audit

def test_kael_function_label_of_a_name_with_lone_surrogates():
    """_handle_kael_function names func by its __qualname__'s UTF-8, which a lone surrogate denies."""
    results = run_cases('''
        class Declines:
            @classmethod
            def __kael_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        def f(*args):
            pass

        for name, qualname in [("surrogate", "\\ud800"), ("plain", "add")]:
            f.__qualname__ = qualname
            results[name] = outcome(lambda: kael._C._handle_kael_function(f, (Declines(),)))
        ''')
    assert results["plain"][:2] == ["raises", "TypeError"] and "'kael.add'" in results["plain"][2]
    assert results["surrogate"][:2] == ["raises", "TypeError"]
    assert results["surrogate"][2].startswith("no implementation found for 'function' on types")


def test_device_and_idx_names_from_str_subclasses():
    """kael.device and _parse_idx read a str's UTF-8 through OwnedUtf8 too (held across the idx
    exporter's getbuffer)."""
    import torch

    import kael

    class S(str):
        pass

    for spec in [S("cpu"), S("cuda:1"), "".join(["cu", "da:0"])]:
        assert str(kael.device(spec)) == str(torch.device(spec))
    with pytest.raises(ValueError, match=r"read_idx: f\.idx: truncated IDX file: 0 bytes"):
        kael._C._parse_idx(bytearray(), S("f.idx"))
    with pytest.raises(UnicodeEncodeError):
        kael._C._parse_idx(b"", "\ud800")
