"""Buckets (guide §8.8, §8.14): blake2b, stable across processes; bucket specs; node shares."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from chongming_core import (
    DEFAULT_NUM_BUCKETS,
    BucketPolicy,
    ConfigurationError,
    buckets_for_node,
    parse_bucket_spec,
)

KEYS = ["tenant-A", "tenant-B", "租户A", "数据源/订单", "2026-10-02", "", "x" * 1000, "🎉"]

_CHILD = """
import json, sys
from chongming_core import BucketPolicy
keys = json.loads(sys.argv[1])
buckets = {n: [BucketPolicy(num_buckets=n).bucket_for(k) for k in keys] for n in (7, 64, 1024)}
print(json.dumps({"buckets": buckets, "builtin_hash": hash(keys[0])}))
"""


def _buckets_in_child(seed: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(KEYS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_buckets_are_the_same_in_every_process_whatever_the_hash_seed() -> None:
    here = {
        str(n): [BucketPolicy(num_buckets=n).bucket_for(k) for k in KEYS] for n in (7, 64, 1024)
    }
    first = _buckets_in_child("0")
    second = _buckets_in_child("4242")
    # the builtin hash() really differs between the two children, so hash() would break this
    assert first["builtin_hash"] != second["builtin_hash"]
    assert first["buckets"] == here
    assert second["buckets"] == here


@pytest.mark.parametrize("key", KEYS)
def test_bucket_is_blake2b_of_the_utf8_key(key: str) -> None:
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    assert BucketPolicy(num_buckets=64).bucket_for(key) == int.from_bytes(digest, "big") % 64


def test_known_buckets_never_change_between_releases() -> None:
    # Pinned values: changing the hash would silently move every existing task's key.
    policy = BucketPolicy()
    assert policy.num_buckets == DEFAULT_NUM_BUCKETS == 64
    assert {key: policy.bucket_for(key) for key in ("tenant-A", "tenant-B", "租户A", "")} == {
        "tenant-A": 7,
        "tenant-B": 28,
        "租户A": 10,
        "": 52,
    }
    assert BucketPolicy(num_buckets=1024).bucket_for("租户A") == 458


def test_every_bucket_is_in_range_and_keys_spread() -> None:
    policy = BucketPolicy(num_buckets=16)
    buckets = [policy.bucket_for(f"tenant-{i}") for i in range(1_000)]
    assert set(buckets) == set(range(16))
    assert BucketPolicy(num_buckets=1).bucket_for("anything") == 0
    assert policy.all_buckets == range(16)


@pytest.mark.parametrize("num_buckets", [0, -3, 2.5, True, "64"])
def test_num_buckets_must_be_a_positive_integer(num_buckets: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        BucketPolicy(num_buckets=num_buckets)  # type: ignore[arg-type]
    assert "num_buckets must be an integer >= 1" in str(info.value)
    assert repr(num_buckets) in str(info.value)


@pytest.mark.parametrize("key", [42, None, b"tenant-A"])
def test_bucket_key_must_be_a_string(key: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        BucketPolicy().bucket_for(key)  # type: ignore[arg-type]
    assert "bucket_key must be a string" in str(info.value)
    assert "bucket_key=str(" in str(info.value)


def test_check_bucket_range() -> None:
    policy = BucketPolicy(num_buckets=64)
    assert policy.check_bucket(0) == 0
    assert policy.check_bucket(63) == 63
    for bad in (64, -1, 1000):
        with pytest.raises(ConfigurationError) as info:
            policy.check_bucket(bad)
        assert f"bucket {bad} is out of range" in str(info.value)
        assert "buckets are 0..63" in str(info.value)
    for wrong_type in ("3", 1.0, True):
        with pytest.raises(ConfigurationError) as info:
            policy.check_bucket(wrong_type)  # type: ignore[arg-type]
        assert "a bucket must be an integer" in str(info.value)
    assert policy.check_buckets(range(16)) == frozenset(range(16))
    with pytest.raises(ConfigurationError):
        policy.check_buckets([1, 2, 64])


# ---------------------------------------------------------------- parse_bucket_spec
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0-15,32", set(range(16)) | {32}),
        ("7", {7}),
        (" 0 - 3 , 5 ", {0, 1, 2, 3, 5}),
        ("3-3", {3}),
        ("0-3,2-5", set(range(6))),
    ],
)
def test_parse_bucket_spec(spec: str, expected: set[int]) -> None:
    assert parse_bucket_spec(spec) == frozenset(expected)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "bucket spec must look like '0-15,32', got ''"),
        ("   ", "bucket spec must look like '0-15,32'"),
        ("0-15,,32", "empty item in bucket spec '0-15,,32'"),
        ("0-15,", "empty item"),
        ("a-3", "'a-3' in bucket spec 'a-3' is not a bucket number or a range like '0-15'"),
        ("1.5", "'1.5' in bucket spec '1.5' is not a bucket number"),
        ("0-", "'0-' in bucket spec '0-' is not a bucket number"),
        ("1-2-3", "is not a bucket number or a range"),
        ("15-0", "range '15-0' in bucket spec '15-0' runs backwards; write '0-15'"),
        ("-1", "'-1' in bucket spec '-1' is not a bucket number"),
    ],
)
def test_parse_bucket_spec_rejects_bad_specs(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_bucket_spec(spec)
    assert fragment in str(info.value)


def test_parse_bucket_spec_rejects_a_non_string() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_bucket_spec(range(3))  # type: ignore[arg-type]
    assert "bucket spec must look like '0-15,32'" in str(info.value)


# ---------------------------------------------------------------- buckets_for_node
@pytest.mark.parametrize(
    ("node_count", "num_buckets"), [(1, 64), (3, 64), (4, 64), (7, 10), (64, 64), (5, 1024)]
)
def test_nodes_cover_every_bucket_exactly_once(node_count: int, num_buckets: int) -> None:
    shares = [buckets_for_node(i, node_count, num_buckets) for i in range(node_count)]
    owned = [bucket for share in shares for bucket in share]
    assert sorted(owned) == list(range(num_buckets))
    assert len(owned) == len(set(owned))
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1
    assert all(share.step == 1 for share in shares)


def test_four_nodes_of_64_buckets() -> None:
    assert [buckets_for_node(i, 4, 64) for i in range(4)] == [
        range(16),
        range(16, 32),
        range(32, 48),
        range(48, 64),
    ]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((4, 4, 64), "node_index must be in 0..3 for node_count=4, got 4"),
        ((-1, 4, 64), "node_index must be in 0..3 for node_count=4, got -1"),
        ((0, 0, 64), "node_count=0"),
        ((0, 8, 4), "8 nodes cannot share 4 buckets; use num_buckets >= nodes"),
    ],
)
def test_buckets_for_node_validation(args: tuple[int, int, int], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        buckets_for_node(*args)
    assert fragment in str(info.value)
