"""Event-loop plumbing, knowing nothing of turns: bounded pools (executors), tasks started at
once (eager), a loop beside the server's (beside), lanes and lag (loop_lane, loop_lag), the
server's loop (server_loop), draining a worker (drain), the event pump, and the socket's
transport (read_first, socket_writes)."""
