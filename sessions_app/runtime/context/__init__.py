"""What a model is sent: the history projected from the stored entries (history), compaction,
the context window's arithmetic, and the attachments a message carries."""
