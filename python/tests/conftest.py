"""Shared fixtures. The tests import the library from the source tree (python/), so they
run without installing it: /usr/bin/python3 -m pytest python/tests."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import boto3  # noqa: F401
except ImportError:  # a missing dependency fails the run; it never skips tests
    raise pytest.UsageError(
        "the Python tests need boto3 (Debian package python3-boto3): run `task deps`, "
        "and run the tests with /usr/bin/python3") from None

from fake_s3 import FakeS3  # noqa: E402


@pytest.fixture
def s3() -> FakeS3:
    return FakeS3(buckets=["ckpt", "root"])


# The client's tests (test_client*.py) share one real stack, `dlc up`, for the session.
from dlc_stack import dlc_stack  # noqa: E402,F401
