"""The live bus: a running turn's state and the delivery of its events to the sockets of this
worker (live), and to the other workers over Redis (live_bus, pubsub_line)."""
