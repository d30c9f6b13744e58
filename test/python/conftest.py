import os
import random
import sys

import numpy as np
import pytest
import torch

import kael

# The tests are grouped by area (ops/, autograd/, nn/, ...). The shared modules here (helpers.py,
# gpt2_assets.py, safetensors_fuzzing.py) import from every area, and so does a test module that
# another area's tests build on (test_fuzz_ops takes test_pointwise_registry's TorchOp): each
# test file's name is unique across the areas.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.extend(os.path.join(_HERE, d) for d in sorted(os.listdir(_HERE))
                if os.path.isdir(os.path.join(_HERE, d)) and not d.startswith(("_", ".")))


@pytest.fixture(autouse=True)
def _seed_everything():
    # every test starts from the same state of each generator, kael's default one too: what a
    # test draws does not depend on the tests run before it
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    kael.manual_seed(0)
    yield
