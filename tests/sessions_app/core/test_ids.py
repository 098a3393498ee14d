"""Tokens drawn without a system call each (core.ids.unique_token) stay unique: a process
forked after the import does not repeat its parent's draws (turn ids, lease holders)."""

import os

import pytest

from sessions_app.core.ids import unique_token


def test_tokens_have_the_asked_width_and_do_not_repeat():
    drawn = [unique_token(128) for _ in range(10_000)]
    assert all(len(token) == 32 for token in drawn)
    assert len(set(drawn)) == len(drawn)
    assert len(unique_token()) == 12


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_process_draws_other_tokens_than_its_parent():
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next token, to the parent, and out
        os.write(write, unique_token(128).encode())
        os._exit(0)
    os.close(write)
    try:
        from_child = os.read(read, 64).decode()
    finally:
        os.close(read)
        os.waitpid(child, 0)
    assert len(from_child) == 32
    assert from_child != unique_token(128)
