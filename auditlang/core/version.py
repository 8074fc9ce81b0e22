"""The package version (``auditlang.__version__``), here so that every layer can name it."""

__version__ = "0.1.0"
