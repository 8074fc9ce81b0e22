"""Datasets: locating, loading and sampling items (no model code)."""

from auditlang.data.loader import DataError, DatasetItems, data_root_for, load_dataset  # noqa: F401
