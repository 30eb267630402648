"""NumPyro models of bayeskern (installed as ``bayeskern.models``)."""
