"""NumPyro models of bayeskern (installed as ``bayeskern.models``): plain functions of the data, sampled by
``bayeskern.inference.run_nuts``."""

from .bke import bke_model
from .kbf import FilterSplit, compress_split, kbf_hyper_model, split_for_validation

__all__ = ["bke_model", "kbf_hyper_model", "FilterSplit", "split_for_validation", "compress_split"]
