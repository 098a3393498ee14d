"""What notices_app adds to a conversation of sessions_app, registered in AppConfig.ready: the
slash commands (/goal, /goals), the model's tools (schedules, goals), and the receivers of
sessions_app's signals."""
