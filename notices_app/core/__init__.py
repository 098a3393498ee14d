"""The bottom of notices_app, beside its models: the queue of background tasks and the VAPID
keys of web push."""
