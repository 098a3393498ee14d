"""The actions on a person's notices: goals, schedules, and the settings of /api/me/."""
