"""The charlm demo: a short run trains (the loss decreases), and its checkpoint loads back."""
import io

import pytest

import kael
from kael.examples import charlm


def test_short_run_loss_decreases_and_checkpoint_round_trips(tmp_path):
    out = io.StringIO()
    path = tmp_path / "model.safetensors"
    result = charlm.main(["--steps", "30", "--batch-size", "8", "--context", "32", "--d-model", "32",
                          "--layers", "1", "--heads", "2", "--eval-batches", "2", "--sample-length", "20",
                          "--lr", "1e-2", "--checkpoint", str(path)], stream=out)
    text = out.getvalue()
    assert "tokens/s" in text and "unigram baseline" in text and "--- sample" in text
    first = sum(result["losses"][:5]) / 5
    last = sum(result["losses"][-5:]) / 5
    assert last < first - 0.5, (first, last)
    assert len(result["sample"]) >= 20
    state, metadata = charlm.load_checkpoint(path)
    assert int(metadata["d_model"]) == 32
    model = charlm.CharTransformer(65, 32, 1, 2, 32)
    model.load_state_dict(state)
    for name, tensor in model.state_dict().items():
        assert tensor.tolist() == state[name].tolist(), name
    # the file is a safetensors file the reference reads too
    import safetensors.torch
    reference = safetensors.torch.load_file(str(path))
    assert sorted(reference) == sorted(state)
    for name, tensor in reference.items():
        assert tensor.tolist() == state[name].tolist(), name
    other = charlm.CharTransformer(65, 32, 1, 2, 32)
    other.load(path)
    for name, tensor in other.state_dict().items():
        assert tensor.tolist() == state[name].tolist(), name


def test_same_seed_same_losses(tmp_path):
    args = ["--steps", "3", "--batch-size", "2", "--context", "16", "--d-model", "16", "--layers", "1", "--heads",
            "2", "--eval-batches", "1", "--sample-length", "0", "--checkpoint", ""]
    first = charlm.main(args, stream=io.StringIO())["losses"]
    second = charlm.main(args, stream=io.StringIO())["losses"]
    assert first == second


def test_help_and_bad_flags(capsys):
    with pytest.raises(SystemExit) as info:
        charlm.parse_args(["--help"])
    assert info.value.code == 0
    help_text = capsys.readouterr().out
    for flag in ("--steps", "--device", "--temperature"):
        assert flag in help_text
    with pytest.raises(SystemExit):
        charlm.parse_args(["--steps", "0"])
    with pytest.raises(SystemExit):
        charlm.parse_args(["--temperature", "-1"])
