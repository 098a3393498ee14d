"""Tools from MCP servers (docs/design.md §31): the operator's servers, the connections this
process keeps to them, and their tools as the turn runs them.

- `config`: MCP_SERVERS_FILE read and checked once;
- `transports/`: how a connection is made, one module per transport (`stdio`, `http`) and one
  registry dict that picks it from a server's `transport`;
- `lane`: the thread and event loop of this process on which every MCP connection lives, so a
  turn on any loop (a socket's, a command's) uses the same kept connections and none of their
  work runs on a turn's loop;
- `connection`: one server's connection: started on first use, its tools listed (and listed
  again when the server says they changed), restarted when it died;
- `names`: the names the tools are offered under (`mcp__<server>__<tool>`, cut to the
  providers' rules);
- `results`: a call's result as the turn stores it (text, images, is_error);
- `offer`: the `Tool`s a turn offers, approvals included.
"""
