"""Futures already answered, as librdkafka's admin client hands them back, for unit tests."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any


def done(value: Any) -> Future[Any]:
    """A future holding `value`, or raising it if it is an exception."""
    future: Future[Any] = Future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future
