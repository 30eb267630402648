"""MCMC drivers, diagnostics and arviz conversion (installed as ``bayeskern.inference``)."""
