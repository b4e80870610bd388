"""Bucket ownership: range checks, owns_all_buckets, and the submit-time refusal of §8.14."""

from __future__ import annotations

import pytest

from chongming_core import BucketPolicy, ConfigurationError
from chongming_runtime.controller._ownership import BucketOwnership, describe_buckets

POLICY = BucketPolicy(64)


def _foreign_key(ownership: BucketOwnership) -> str:
    return next(k for k in (f"tenant-{i}" for i in range(1000)) if not ownership.owns_bucket(
        POLICY.bucket_for(k)
    ))  # fmt: skip


def test_unrestricted_owns_everything_and_needs_no_key() -> None:
    ownership = BucketOwnership(POLICY, None)
    assert ownership.owns_all_buckets
    assert ownership.owns_bucket(63)
    assert ownership.owns_bucket(None)
    assert ownership.bucket_for_submit(None) is None
    assert ownership.bucket_for_submit("tenant-A") == POLICY.bucket_for("tenant-A")
    assert ownership.query_buckets() is None


def test_partial_ownership_refuses_foreign_buckets_with_the_guides_reason() -> None:
    ownership = BucketOwnership(POLICY, range(16))
    assert not ownership.owns_all_buckets
    key = _foreign_key(ownership)
    bucket = POLICY.bucket_for(key)
    with pytest.raises(ConfigurationError) as refused:
        ownership.bucket_for_submit(key)
    text = str(refused.value)
    assert f"bucket {bucket} (from bucket_key={key!r}) does not belong to this node" in text
    assert "[0, 1, ..., 15]" in text
    assert "run by no node" in text
    assert ownership.query_buckets() == frozenset(range(16))


def test_partial_ownership_requires_a_key() -> None:
    ownership = BucketOwnership(POLICY, range(16))
    with pytest.raises(ConfigurationError, match="bucket_key is required"):
        ownership.bucket_for_submit(None)
    assert not ownership.owns_bucket(None)


def test_listing_every_bucket_is_not_a_partition() -> None:
    ownership = BucketOwnership(POLICY, range(64))
    assert ownership.owns_all_buckets
    assert ownership.bucket_for_submit(None) is None
    assert ownership.query_buckets() is None


@pytest.mark.parametrize(
    ("owned", "message"),
    [
        (range(60, 70), "owned bucket 64 is out of range"),
        ([-1], "owned bucket -1 is out of range"),
        ([], "owned_buckets is empty"),
        ("0-15", "parse_bucket_spec"),
        ([1.5], "non-integer"),
    ],
)
def test_bad_ownership_is_refused_at_construction(owned: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        BucketOwnership(POLICY, owned)  # type: ignore[arg-type]


def test_describe_buckets() -> None:
    assert describe_buckets(range(16)) == "[0, 1, ..., 15]"
    assert describe_buckets([3, 1, 2]) == "[1, 2, 3]"
    assert describe_buckets([*range(16), 32]) == "[0-15, 32]"
    assert describe_buckets([]) == "[]"
