# SPDX-License-Identifier: Apache-2.0
"""The README's Python blocks run as written, from the repository root."""

import os
import re

import pytest

from conftest import ROOT


def readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    python = text[text.index("\n## Python\n") : text.index("\n## The C API in brief")]
    return re.findall(r"```python\n(.*?)```", python, re.S)


def run_block(code, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})


def test_the_readme_has_its_python_blocks():
    blocks = readme_blocks()
    assert len(blocks) == 2
    assert "libtrellis.forward(" in blocks[0] and "libtrellis.hf" in blocks[1]


def test_the_numpy_and_torch_block_runs(monkeypatch, capsys):
    pytest.importorskip("torch")  # its last line makes torch modules
    run_block(readme_blocks()[0], monkeypatch)
    out = capsys.readouterr().out
    assert "(256, 512) (2, 4, 512)" in out


def test_the_transformers_block_runs(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from hf_util import toy16_or_skip

    toy16_or_skip()
    run_block(readme_blocks()[1], monkeypatch)
