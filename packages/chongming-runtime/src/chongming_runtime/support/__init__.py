"""Low-level helpers every layer of the runtime may use: the thread cache (short jobs and
attempts on reused threads), what a background loop does with an exception, calling every
callback, generated ids and checks on text. They import nothing else of the runtime.

A loop that lives as long as its owner has a thread of its own instead: the writer's
flush thread, the command poller, the work server, and the process executor's watcher of
each child.

Internal: import the public names from `chongming_runtime`.
"""
