# SPDX-License-Identifier: Apache-2.0
import json
import os

import numpy as np
import pytest

try:
    # PyTorch before the library when it is present, as in a torch program:
    # the CUDA libraries both link are then the ones PyTorch brought.
    import torch  # noqa: F401
except ImportError:
    pass

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VECTORS = os.path.join(ROOT, "tests", "data", "testvectors")
TOY_MODEL = os.path.join(VECTORS, "toy-exl3-model")


def load_cases():
    with open(os.path.join(VECTORS, "manifest.json")) as f:
        return json.load(f)["cases"]


CASES = load_cases()


def case_path(case):
    return os.path.join(VECTORS, case["name"] + ".safetensors")


def ref_path(case):
    return os.path.join(VECTORS, case["name"] + ".ref.safetensors")


def rel_l2(y, ref):
    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def max_rel(y, ref):
    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.abs(y - ref).max() / np.abs(ref).max())


def assert_close(y, ref, rel_tol=2e-3, max_tol=2e-3, what=""):
    """The known answers' tolerances: relative L2 and max|d| / max|y|."""
    rel, mx = rel_l2(y, ref), max_rel(y, ref)
    assert (
        rel <= rel_tol and mx <= max_tol
    ), "%s: rel L2 %.3g (tol %.3g), max|d|/max|y| %.3g (tol %.3g)" % (
        what,
        rel,
        rel_tol,
        mx,
        max_tol,
    )


@pytest.fixture(params=CASES, ids=[c["name"] for c in CASES])
def case(request):
    return request.param
