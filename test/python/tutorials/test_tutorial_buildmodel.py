"""PyTorch's model-building tutorial (pytorch/tutorials, beginner_source/basics/buildmodel_tutorial.py),
its statements spelled out here, run with torch renamed to kael: every statement runs, and it
prints what torch prints (the model's structure, sizes, grad_fn names, the tensors' layout), with
the numbers masked where they come from the random generator or from random initial weights;
the two generators differ. The device line is the tutorial's current one (torch.accelerator)."""
import contextlib
import io
import re

import pytest
import torch

import kael

# the tutorials' model (the optimization tutorial defines the same one)
MODEL = '''
class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28*28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits
'''

TUTORIAL = '''
device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
print(f"Using {device} device")
''' + MODEL + '''
model = NeuralNetwork().to(device)
print(model)

X = torch.rand(1, 28, 28, device=device)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
print(f"Predicted class: {y_pred}")

input_image = torch.rand(3,28,28)
print(input_image.size())

flatten = nn.Flatten()
flat_image = flatten(input_image)
print(flat_image.size())

layer1 = nn.Linear(in_features=28*28, out_features=20)
hidden1 = layer1(flat_image)
print(hidden1.size())

print(f"Before ReLU: {hidden1}\\n\\n")
hidden1 = nn.ReLU()(hidden1)
print(f"After ReLU: {hidden1}")

seq_modules = nn.Sequential(
    flatten,
    layer1,
    nn.ReLU(),
    nn.Linear(20, 10)
)
input_image = torch.rand(3,28,28)
logits = seq_modules(input_image)

softmax = nn.Softmax(dim=1)
pred_probab = softmax(logits)

print(f"Model structure: {model}\\n\\n")

for name, param in model.named_parameters():
    print(f"Layer: {name} | Size: {param.size()} | Values : {param[:2]} \\n")
'''


def run(lib):
    namespace = {"torch": lib, "nn": lib.nn}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(TUTORIAL, "<buildmodel_tutorial>", "exec"), namespace)
    return out.getvalue(), namespace


def mask(text):
    text = re.sub(r"-?\d+\.\d*(e[+-]\d+)?", "#", text)  # values
    # a tensor's column widths and line breaks follow its values (a sign takes a column): compare
    # the elements, not where the lines break
    text = re.sub(r"\[\s+", "[", re.sub(r"\s+", " ", text))
    text = re.sub(r"Predicted class: tensor\(\[\d\]\)", "Predicted class: tensor([#])", text)
    return text.replace("torch.", "LIB.").replace("kael.", "LIB.")


@pytest.fixture(scope="module")
def outputs():
    return run(kael), run(torch)


def test_buildmodel_tutorial_prints_what_torch_prints(outputs):
    (ours, _), (theirs, _) = outputs
    assert mask(ours) == mask(theirs)
    # the device line and the model's structure, exactly (no values in them)
    assert ours.split("Predicted class")[0] == theirs.split("Predicted class")[0]
    assert "Using cpu device" in ours and "(linear_relu_stack): Sequential(" in ours
    assert ours.count("grad_fn=<SliceBackward0>") == theirs.count("grad_fn=<SliceBackward0>") == 6


def test_buildmodel_tutorial_values(outputs):
    # what the masks hide: the layers compute what torch's compute with the same weights and input
    (_, ns), _ = outputs
    model = ns["model"]
    ref = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    with torch.no_grad():
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy()))
    x = ns["X"]
    logits = model(x)
    want = ref(torch.from_numpy(x.numpy()))
    torch.testing.assert_close(torch.from_numpy(logits.detach().numpy()), want.detach(), rtol=1e-5, atol=1e-5)
    probs = ns["softmax"](ns["logits"])
    torch.testing.assert_close(torch.from_numpy(probs.detach().numpy().sum(1)), torch.ones(3), rtol=0, atol=1e-6)
    assert ns["y_pred"].tolist() == [int(want.softmax(1).argmax(1))]
    assert ns["flat_image"].shape == (3, 784) and ns["hidden1"].min().item() >= 0


@pytest.mark.skipif(kael.cuda.is_available(), reason="this build has a CUDA backend")
def test_accelerator_without_a_device_answers_as_torch():
    assert kael.accelerator.is_available() is torch.accelerator.is_available() is False
    assert kael.accelerator.current_accelerator() is None and torch.accelerator.current_accelerator() is None
    assert kael.accelerator.current_accelerator(check_available=True) is None
    assert kael.accelerator.device_count() == torch.accelerator.device_count() == 0
    for call in (lambda a: a.current_device_index(), lambda a: a.set_device_index(0)):
        with pytest.raises(RuntimeError) as ours:
            call(kael.accelerator)
        with pytest.raises(RuntimeError) as theirs:
            call(torch.accelerator)
        assert str(ours.value) == str(theirs.value)
