"""The runtime: what runs a turn, in rooms on floors of their own (pyproject.toml's
`sessions-floors`): live above turn, above tools, providers, context, and the loop plumbing."""
