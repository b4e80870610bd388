"""Retry, backoff, timeout, concurrency, pipeline and bucket policies (guide §5, §6, §8)."""

from __future__ import annotations

from chongming_core import AggregationPolicy as AggregationPolicy
from chongming_core import BucketPolicy as BucketPolicy
from chongming_core import ConcurrencyPolicy as ConcurrencyPolicy
from chongming_core import ExponentialBackoff as ExponentialBackoff
from chongming_core import FixedBackoff as FixedBackoff
from chongming_core import Jitter as Jitter
from chongming_core import JoinMode as JoinMode
from chongming_core import RetryPolicy as RetryPolicy
from chongming_core import Timeout as Timeout
from chongming_core import buckets_for_node as buckets_for_node
from chongming_core import parse_bucket_spec as parse_bucket_spec

__all__ = [
    "AggregationPolicy",
    "BucketPolicy",
    "ConcurrencyPolicy",
    "ExponentialBackoff",
    "FixedBackoff",
    "Jitter",
    "JoinMode",
    "RetryPolicy",
    "Timeout",
    "buckets_for_node",
    "parse_bucket_spec",
]
