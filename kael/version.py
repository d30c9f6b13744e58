"""kael's version, in one place (as torch.version).

pyproject.toml reads it for the distribution's metadata (`[tool.setuptools.dynamic]`), CMake
reads it at configure time for kael._C (csrc/build_config.cpp), and kael.__version__ is it.
"""
__version__ = "0.1.0"
