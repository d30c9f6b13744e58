"""The module paths of torch.nn.modules that PyTorch programs import classes from
(`from torch.nn.modules.linear import Linear`), and the classes torch keeps in each. kael keeps
its layers in fewer files; each path below is a module of kael.nn.modules that re-exports the
classes kael.nn.modules has of that path's list (docs/decisions/namespaces.md)."""
from __future__ import annotations

PATHS = {
    "linear": ("Bilinear", "Identity", "LazyLinear", "Linear"),
    "sparse": ("Embedding", "EmbeddingBag"),
    "dropout": ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"),
    "flatten": ("Flatten", "Unflatten"),
    "normalization": ("LocalResponseNorm", "CrossMapLRN2d", "LayerNorm", "GroupNorm", "RMSNorm"),
    "batchnorm": ("BatchNorm1d", "LazyBatchNorm1d", "BatchNorm2d", "LazyBatchNorm2d", "BatchNorm3d",
                  "LazyBatchNorm3d", "SyncBatchNorm", "_BatchNorm"),
    "padding": ("CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
                "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
                "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"),
    "distance": ("PairwiseDistance", "CosineSimilarity"),
    "upsampling": ("UpsamplingNearest2d", "UpsamplingBilinear2d", "Upsample"),
    "fold": ("Fold", "Unfold"),
}


def _private_class(name: str):
    """A base class kael.nn.modules does not export (_BatchNorm): found in the file of
    kael.nn.modules that defines it."""
    import sys

    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("kael.nn.modules.") and module is not None:
            value = vars(module).get(name)
            if isinstance(value, type) and value.__module__ == module_name:
                return value
    return None


def export(module_globals: dict, path: str) -> list:
    """Puts into the module the classes of `path` that kael.nn.modules has (public ones from the
    package, the underscored base classes from the file defining them); returns the public
    names (the module's __all__)."""
    import kael.nn.modules as modules

    found = {}
    for name in PATHS[path]:
        value = _private_class(name) if name.startswith("_") else getattr(modules, name, None)
        if value is not None:
            found[name] = value
    module_globals.update(found)
    return [name for name in found if not name.startswith("_")]
