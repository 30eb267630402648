"""arviz, imported without its import-time FutureWarning about the 1.0 refactor."""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

__all__ = ["az"]
