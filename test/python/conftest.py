import os
import random
import sys

import numpy as np
import pytest
import torch

import kael

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _seed_everything():
    # every test starts from the same state of each generator, kael's default one too: what a
    # test draws does not depend on the tests run before it
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    kael.manual_seed(0)
    yield
