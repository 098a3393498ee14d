"""The bottom floor of sessions_app: ids, input limits, frame checks, signals, throttles —
what every floor above may use and which itself uses nothing of the app."""
