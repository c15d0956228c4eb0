"""perfweave: performance analysis for parallel HPC programs."""

__version__ = "0.1.0"
