"""docs/bad-input.md's gateway rows: each request (tests/bad_input_gateway.py) gets its status and one message,
the ones the table shows.
"""

from __future__ import annotations

import pytest

from tests.bad_input_doc import REGENERATE, documented, same
from tests.bad_input_gateway import GATEWAY_CASES, MID_STREAM, run_gateway_case


@pytest.mark.parametrize("case", GATEWAY_CASES, ids=lambda c: c.what)
def test_each_bad_request_gets_its_status_and_one_message(case):
    status, message = run_gateway_case(case)
    streaming = isinstance(case.body, dict) and case.body.get("stream") is True
    assert (status == MID_STREAM if streaming else 400 <= int(status) < 600), status
    assert "\n" not in message
    assert same(documented().get((case.what, status), ""), message), REGENERATE
