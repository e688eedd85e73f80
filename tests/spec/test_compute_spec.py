"""The `compute:` section: fused attention by default, unfused on request, anything else rejected."""

from __future__ import annotations

import pytest

from astra_hetero.errors import SpecError
from astra_hetero.spec import parse_spec
from tests.conftest import make_spec_data


def test_fused_attention_is_the_default_and_unfused_can_be_chosen():
    assert parse_spec(make_spec_data()).compute.attention == "fused"
    assert parse_spec(make_spec_data(compute={"attention": "unfused"})).compute.attention == "unfused"


@pytest.mark.parametrize(
    "compute, field", [({"attention": "flash"}, "compute.attention"), ({"kernels": 3}, "compute.kernels")]
)
def test_unknown_choices_name_the_field(compute, field):
    with pytest.raises(SpecError) as error:
        parse_spec(make_spec_data(compute=compute))
    assert error.value.field == field
