"""The scoring stage: stored results -> records (``stage.py``) -> per-cell metrics (``cellmetrics.py``)."""
