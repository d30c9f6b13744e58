"""PyTorch's optimization tutorial (pytorch/tutorials, beginner_source/basics/optimization_tutorial.py),
its statements spelled out here, run with torch renamed to kael: the data loaders come from
`kael.utils.data` as the tutorial imports them from `torch.utils.data`, and the training and test
loops print what torch's print. FashionMNIST cannot be downloaded here, so its two datasets are
TensorDatasets of the same shapes (images (N, 1, 28, 28) in [0, 1], labels 0-9 that light a band
of the image, so that there is something to learn), fewer samples and epochs; the model starts from the
same weights in both libraries (copied from torch's), and nothing is shuffled, so the losses and
accuracies match to rounding."""
import contextlib
import io
import re

import numpy as np
import pytest
import torch

import kael
from test_tutorial_buildmodel import MODEL

SETUP = '''
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

training_data = TensorDataset(torch.tensor(train_images), torch.tensor(train_labels))
test_data = TensorDataset(torch.tensor(test_images), torch.tensor(test_labels))

train_dataloader = DataLoader(training_data, batch_size=64)
test_dataloader = DataLoader(test_data, batch_size=64)

''' + MODEL + '''
model = NeuralNetwork()
with torch.no_grad():
    for p, w in zip(model.parameters(), initial_weights):
        p.copy_(torch.tensor(w))

learning_rate = 1e-3
batch_size = 64
epochs = 5
'''

TUTORIAL = '''
loss_fn = nn.CrossEntropyLoss()

optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    # Set the model to training mode - important for batch normalization and dropout layers
    # Unnecessary in this situation but added for best practices
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        # Compute prediction and loss
        pred = model(X)
        loss = loss_fn(pred, y)

        # Backpropagation
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if batch % 100 == 0:
            loss, current = loss.item(), batch * batch_size + len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test_loop(dataloader, model, loss_fn):
    # Set the model to evaluation mode - important for batch normalization and dropout layers
    # Unnecessary in this situation but added for best practices
    model.eval()
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    test_loss, correct = 0, 0

    # Evaluating the model with torch.no_grad() ensures that no gradients are computed during test mode
    # also serves to reduce unnecessary gradient computations and memory usage for tensors with requires_grad=True
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()

    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \\n Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f} \\n")

loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

epochs = 3
for t in range(epochs):
    print(f"Epoch {t+1}\\n-------------------------------")
    train_loop(train_dataloader, model, loss_fn, optimizer)
    test_loop(test_dataloader, model, loss_fn)
print("Done!")
'''


def data():
    rng = np.random.default_rng(7)

    def split(n):
        # noise in [0, 0.3], and the label's band of two rows (of ten bands) lit
        images = rng.random((n, 1, 28, 28), dtype=np.float32) * np.float32(0.3)
        labels = rng.integers(0, 10, n)
        for label in range(10):
            images[labels == label, 0, 2 * label:2 * label + 2] = 1.0
        return images, labels.astype(np.int64)

    train_images, train_labels = split(6500)  # 102 batches of 64 (the last partial): two loss prints per epoch
    test_images, test_labels = split(1000)
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                              torch.nn.ReLU(), torch.nn.Linear(512, 10))
    weights = [p.detach().numpy().copy() for p in ref.parameters()]
    return {"train_images": train_images, "train_labels": train_labels, "test_images": test_images,
            "test_labels": test_labels, "initial_weights": weights}


def run(lib, inputs):
    name = lib.__name__
    source = SETUP + TUTORIAL
    # the tutorial's own imports, with torch renamed
    source = source.replace("from torch import nn", f"from {name} import nn")
    source = source.replace("from torch.utils.data import", f"from {name}.utils.data import")
    namespace = {"torch": lib, **inputs}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<optimization_tutorial>", "exec"), namespace)
    return out.getvalue()


NUMBER = r"\d+\.\d+"


@pytest.fixture(scope="module")
def outputs():
    inputs = data()
    return run(kael, inputs), run(torch, inputs)


def test_optimization_tutorial_prints_what_torch_prints(outputs):
    ours, theirs = outputs
    assert re.sub(NUMBER, "#", ours) == re.sub(NUMBER, "#", theirs)
    assert ours.count("Test Error") == 3 and ours.count("\nloss: ") == 6 and ours.endswith("Done!\n")
    # the losses: the same to rounding (the same weights, data and order); the accuracies within a
    # few test samples (a near tie may fall either way under another rounding)
    for pattern, rtol, atol in ((r"loss: (\d+\.\d+)", 1e-4, 0), (r"Accuracy: (\d+\.\d+)%", 0, 0.35)):
        got = [float(x) for x in re.findall(pattern, ours)]
        want = [float(x) for x in re.findall(pattern, theirs)]
        assert len(got) == len(want) > 0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_optimization_tutorial_learns(outputs):
    ours, _ = outputs
    losses = [float(x) for x in re.findall(r"Avg loss: (\d+\.\d+)", ours)]
    accuracy = [float(x) for x in re.findall(r"Accuracy: (\d+\.\d+)%", ours)]
    assert losses[0] > losses[1] > losses[2]
    assert accuracy[2] > accuracy[0] + 10


def test_utils_data_is_kael_data():
    import kael.data
    import kael.utils.data
    for name in kael.data.__all__:
        assert getattr(kael.utils.data, name) is getattr(kael.data, name)
    assert kael.utils.data.DataLoader is kael.data.DataLoader
