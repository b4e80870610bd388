"""chongming-store-postgres: `PostgresTaskStore`, one store shared by many machines.

Example::

    from chongming_store_postgres import PostgresTaskStore, redact_dsn

    store = PostgresTaskStore("postgresql://app:pw@db.internal:5432/chongming")
    print(redact_dsn("postgresql://app:pw@db.internal:5432/chongming"))
    # postgresql://app:****@db.internal:5432/chongming
"""

from __future__ import annotations

from chongming_store_postgres._dsn import redact_dsn as redact_dsn
from chongming_store_postgres._store import PostgresTaskStore as PostgresTaskStore

__all__ = ["PostgresTaskStore", "redact_dsn"]
