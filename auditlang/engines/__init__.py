"""Engines execute model requests. Each engine lives in its own module and is imported lazily."""
