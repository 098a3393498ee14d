from notices_app.core.vapid import vapid_public_key


def web_push(request) -> dict:
    """`vapid_public_key` for the page's Web Push subscription; "" when Web Push is off."""
    return {"vapid_public_key": vapid_public_key()}
