"""NumPyro models of bayeskern (installed as ``bayeskern.models``)."""

from .bke import bke_model

__all__ = ["bke_model"]
