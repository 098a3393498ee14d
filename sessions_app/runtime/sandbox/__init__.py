"""The session's sandbox (docs/design.md §28): the `run_code` tool, the isolation that runs
it (one module per backend behind `base.SandboxBackend`, picked by `registry`), the start
probe that checks the isolation holds, and the workspace a run reads and writes — a manifest
of content-addressed blobs kept in the session's entries, so that a branch gets it as it was.
"""
