"""The PyTorch level where PyTorch is importable, with or without a GPU."""

import pytest

import libtrellis
from libtrellis import TrellisError

from conftest import TOY_MODEL

torch = pytest.importorskip("torch")


def test_the_operator_is_registered():
    schema = str(torch.ops.libtrellis.exl3_linear.default._schema)
    assert schema.startswith("libtrellis::exl3_linear(Tensor x, ")
    assert schema.endswith(") -> Tensor")
    assert libtrellis.exl3_linear is not None


def test_an_unknown_plan_is_a_clear_error():
    x = torch.zeros(2, 256, dtype=torch.float16)
    with pytest.raises(TrellisError, match="closed or was never made") as e:
        torch.ops.libtrellis.exl3_linear(x, 123456789, 128, torch.float16)
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"


def test_no_cuda_is_a_clear_error():
    if torch.cuda.is_available() and libtrellis.cuda_built():
        pytest.skip("CUDA is usable here")
    with pytest.raises(TrellisError) as e:
        libtrellis.EXL3Linear(TOY_MODEL, "model.layers.0.mlp.up_proj")
    assert e.value.status == "TRELLIS_ERR_NO_DEVICE"
