"""What every app of the project may use: metrics, log context, the channel layer, SQLite's WAL,
the error table. Nothing here imports an app or the wiring (the `jarvis-shared-at-the-bottom`
contract in pyproject.toml)."""
