"""The one-time GGUF conversion turns transformers' own tqdm bar off where stderr is not a terminal
(plain logs and CI printed its raw frames), and leaves it as it was afterwards."""

from __future__ import annotations

import io
import sys

import pytest


def test_the_gguf_bar_is_off_in_plain_logs_and_restored(monkeypatch) -> None:
    mod = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    from auditlang.engines.embedded import _quiet_gguf_bar

    before = mod.tqdm
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    with _quiet_gguf_bar():
        bar = mod.tqdm(range(3), desc="Converting")
        assert bar.disable and list(bar) == [0, 1, 2]
    assert mod.tqdm is before
    assert sys.stderr.getvalue() == ""
