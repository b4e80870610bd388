"""Low-level helpers every layer of the runtime may use: the thread cache (the one way the
runtime gets a thread), what a background loop does with an exception, calling every callback,
generated ids and checks on text. They import nothing else of the runtime.

Internal: import the public names from `chongming_runtime`.
"""
