"""One drawn figure as the report writes it (PNG and PDF bytes): shared by ``report.figures``,
which draws it with matplotlib, and the figure cache of ``report/__init__.py``, which reads it back
without importing matplotlib."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    pdf: bytes

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        out = [folder / f"{self.name}.png", folder / f"{self.name}.pdf"]
        out[0].write_bytes(self.png)
        out[1].write_bytes(self.pdf)
        return out
