"""The one driver-error boundary: a table from driver exceptions to coded errors."""

from __future__ import annotations

import pytest

from ditto.errors import DittoError, ExceptionMapping, map_exceptions, translate

pytestmark = pytest.mark.anyio


class DriverError(Exception):
    pass


class DriverTimeout(DriverError):
    pass


def _timeout(exc: DriverTimeout) -> DittoError:
    return DittoError("the store did not answer in time", code="STORE_TIMEOUT", retryable=True)


def _by_text(exc: DriverError) -> DittoError | None:
    return DittoError("the store is down", code="STORE_UNAVAILABLE") if "down" in str(exc) else None


TABLE: ExceptionMapping = {DriverTimeout: _timeout, (DriverError, OSError): _by_text}


def test_a_mapped_failure_is_raised_as_its_error_from_the_driver_s() -> None:
    cause = DriverTimeout("secret://user:hunter2@host")
    with pytest.raises(DittoError) as raised, map_exceptions(TABLE):
        raise cause
    assert (raised.value.code, raised.value.retryable) == ("STORE_TIMEOUT", True)
    assert raised.value.__cause__ is cause
    assert "hunter2" not in str(raised.value)


def test_the_first_matching_key_wins_and_a_tuple_key_matches_each_class() -> None:
    with pytest.raises(DittoError) as raised, map_exceptions(TABLE):
        raise OSError("down")
    assert raised.value.code == "STORE_UNAVAILABLE"


@pytest.mark.parametrize("failure", [DriverError("odd"), KeyError("not the driver's")])
def test_a_declined_or_unmapped_failure_passes_through_unchanged(failure: Exception) -> None:
    with pytest.raises(type(failure)) as raised, map_exceptions(TABLE):
        raise failure
    assert raised.value is failure


async def test_one_boundary_serves_async_with_too() -> None:
    boundary = map_exceptions(TABLE)
    for _ in range(2):  # stateless: entered again
        with pytest.raises(DittoError):
            async with boundary:
                raise DriverTimeout()


def test_translate_hands_back_the_error_with_its_cause_set() -> None:
    cause = DriverTimeout()
    error = translate(cause, TABLE)
    assert error is not None
    assert error.code == "STORE_TIMEOUT"
    assert error.__cause__ is cause
    assert translate(DriverError("odd"), TABLE) is None
    assert translate(KeyError(), TABLE) is None
