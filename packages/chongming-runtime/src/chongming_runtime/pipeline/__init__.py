"""Pipelines (guide §8.12): the definition of a DAG of registered names and its rules, and the
coordinator that releases nodes as their joins allow and settles the whole. The coordinator
reaches its controller only through the `PipelineHost` it is handed, and imports nothing of
the controller.

Internal: import the public names from `chongming_runtime`.
"""
