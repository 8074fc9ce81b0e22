"""A figure's PDF and PNG do not depend on which was rendered first (figures._freeze_layout), so the
report's figure workers may render them as two jobs in any order and write the serial path's bytes."""

from __future__ import annotations

import pickle

import pytest

pytest.importorskip("matplotlib")

from auditlang.report import figures  # noqa: E402


def _heatmap():
    """A constrained-layout figure of the kinds the report draws: two panels, a shared colorbar,
    titles and a legend."""
    import numpy as np

    with figures.plt.rc_context(figures.RC):
        fig, axes = figures.plt.subplots(1, 2, figsize=(6.0, 3.0), layout="constrained", squeeze=False)
        im = None
        for k, ax in enumerate(axes[0]):
            im = ax.imshow(np.arange(12.0).reshape(3, 4) * (k + 1), vmin=0, vmax=24)
            ax.set_title(f"panel {k} with a long title")
            ax.plot([0, 3], [0, 2], label="line")
        fig.colorbar(im, ax=list(axes[0]), fraction=0.02)
        axes[0][0].legend(loc="upper left")
        fig.suptitle("a figure title")
    return pickle.dumps(fig)


def _both(fig_bytes: bytes, order: tuple[str, str], *, freeze: bool = True) -> dict[str, bytes]:
    fig = pickle.loads(fig_bytes)
    render = figures._render if freeze else figures._savefig
    return {fmt: render(fig, fmt) for fmt in order}


def test_png_and_pdf_bytes_do_not_depend_on_the_order_they_render_in() -> None:
    fig = _heatmap()
    with figures.plt.rc_context(figures.RC):
        png_first, pdf_first = _both(fig, ("png", "pdf")), _both(fig, ("pdf", "png"))
        alone = {fmt: _both(fig, (fmt,))[fmt] for fmt in figures.FORMATS}
    assert png_first == pdf_first == alone


def test_without_the_frozen_layout_the_order_would_matter() -> None:
    """The case the freeze exists for: a layout engine re-run on every draw gives a PDF drawn after
    the PNG other bytes than a PDF drawn first. Should matplotlib stop doing so, this test fails
    and the freeze (an extra layout pass per figure) can go."""
    fig = _heatmap()
    with figures.plt.rc_context(figures.RC):
        png_first = _both(fig, ("png", "pdf"), freeze=False)
        pdf_first = _both(fig, ("pdf", "png"), freeze=False)
    assert png_first["pdf"] != pdf_first["pdf"] or png_first["png"] != pdf_first["png"]
