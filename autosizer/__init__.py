"""autosizer: keeps a PySpark streaming job ahead of its input by changing its elasticity factor."""

__version__ = "0.1.0"
