"""The tools a model may call: what a tool is (base), the runtime's own (builtin), and the
registry that names every tool and runs one call (registry)."""
