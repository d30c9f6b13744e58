"""Seeding and state of kael's default random generator, as torch.random has them.

Every random op draws from a kael.Generator (Philox4x32-10, counter-based: docs/decisions/random.md,
"Random numbers"); these functions act on the default one, which ops use when their
`generator=` is None.
"""
from __future__ import annotations

from kael._C import Generator, Tensor, default_generator

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"]


def manual_seed(seed) -> Generator:
    """Seeds the default generator (an int in [-2**63, 2**64), or anything int() takes) and returns it."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    """Seeds the default generator from a non-deterministic source and returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restores the default generator's state from get_rng_state()."""
    default_generator.set_state(new_state)
