"""kael.optim: optimizers and learning-rate schedulers, as torch.optim (pure Python, in-place
updates under no_grad)."""
from kael.optim import lr_scheduler  # noqa: F401
from kael.optim.adadelta import Adadelta
from kael.optim.adagrad import Adagrad
from kael.optim.adam import Adam, AdamW
from kael.optim.adamax import Adamax
from kael.optim.lbfgs import LBFGS
from kael.optim.nadam import NAdam, RAdam
from kael.optim.optimizer import Optimizer
from kael.optim.rmsprop import RMSprop
from kael.optim.rprop import ASGD, Rprop
from kael.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop",
           "ASGD", "LBFGS", "lr_scheduler"]
