"""Buckets (guide §8.8, §8.14): business keys mapped to a fixed number of buckets.

``bucket = blake2b(key) % num_buckets``. Never the builtin ``hash()``: it is salted
per process (PYTHONHASHSEED), so one key would land in different buckets in
different processes and "same bucket, same node" would silently break.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from chongming_core._errors import ConfigurationError

__all__ = ["DEFAULT_NUM_BUCKETS", "BucketPolicy", "buckets_for_node", "parse_bucket_spec"]

#: Buckets per deployment unless configured; changing it later moves almost every key.
DEFAULT_NUM_BUCKETS = 64


@dataclass(frozen=True, slots=True)
class BucketPolicy:
    """Maps a business key (tenant id, data source, date partition...) to a bucket number.

    Example::

        BucketPolicy(num_buckets=64).bucket_for("tenant-A")  # the same in every process
    """

    num_buckets: int = DEFAULT_NUM_BUCKETS

    def __post_init__(self) -> None:
        n = self.num_buckets
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigurationError(f"num_buckets must be an integer >= 1, got {n!r}")

    def bucket_for(self, key: str) -> int:
        """The bucket of `key`: stable across processes, machines and Python versions."""
        if not isinstance(key, str):
            raise ConfigurationError(
                f"bucket_key must be a string, got {key!r} ({type(key).__name__}); "
                "convert it explicitly, e.g. bucket_key=str(tenant_id)"
            )
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.num_buckets

    def check_bucket(self, bucket: int) -> int:
        """Return `bucket` if it is in range, else raise `ConfigurationError`."""
        if isinstance(bucket, bool) or not isinstance(bucket, int):
            raise ConfigurationError(f"a bucket must be an integer, got {bucket!r}")
        if not 0 <= bucket < self.num_buckets:
            raise ConfigurationError(
                f"bucket {bucket} is out of range: with num_buckets={self.num_buckets} "
                f"buckets are 0..{self.num_buckets - 1}"
            )
        return bucket

    def check_buckets(self, buckets: Iterable[int]) -> frozenset[int]:
        """Validate every bucket of `buckets` and return them as a set."""
        return frozenset(self.check_bucket(b) for b in buckets)

    @property
    def all_buckets(self) -> range:
        """Every bucket number."""
        return range(self.num_buckets)


def parse_bucket_spec(spec: str) -> frozenset[int]:
    """Parse ``"0-15,32"`` into ``{0, ..., 15, 32}``.

    Raises:
        ConfigurationError: for anything that is not a comma-separated list of
            non-negative integers and ``low-high`` ranges.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"bucket spec must look like '0-15,32', got {spec!r}")
    result: set[int] = set()
    for raw in spec.split(","):
        part = raw.strip()
        if not part:
            raise ConfigurationError(f"empty item in bucket spec {spec!r}; write e.g. '0-15,32'")
        low_text, sep, high_text = part.partition("-")
        try:
            low = int(low_text.strip())
            high = int(high_text.strip()) if sep else low
        except ValueError:
            raise ConfigurationError(
                f"{part!r} in bucket spec {spec!r} is not a bucket number or a range like '0-15'"
            ) from None
        if low < 0 or high < 0:
            raise ConfigurationError(f"bucket numbers are >= 0, got {part!r} in {spec!r}")
        if high < low:
            raise ConfigurationError(
                f"range {part!r} in bucket spec {spec!r} runs backwards; write '{high}-{low}'"
            )
        result.update(range(low, high + 1))
    return frozenset(result)


def buckets_for_node(node_index: int, node_count: int, num_buckets: int) -> range:
    """A contiguous, disjoint share of the buckets for node `node_index` of `node_count`.

    Together the nodes cover every bucket exactly once; shares differ by at most one.
    """
    if node_count < 1 or not 0 <= node_index < node_count:
        raise ConfigurationError(
            f"node_index must be in 0..{node_count - 1} for node_count={node_count}, "
            f"got {node_index}"
        )
    if num_buckets < node_count:
        raise ConfigurationError(
            f"{node_count} nodes cannot share {num_buckets} buckets; use num_buckets >= nodes"
        )
    start = node_index * num_buckets // node_count
    end = (node_index + 1) * num_buckets // node_count
    return range(start, end)
