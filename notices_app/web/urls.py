"""URLs of notices_app, under /api/ (included by jarvis_site.urls); the service worker is
served at the site's root. `me/` itself is accounts_app's route: its view is this app's
settings view with the account's DELETE added (accounts_app.api.MeView)."""

from django.urls import path

from notices_app.web.api import PushSubscriptionViewSet

urlpatterns = [
    path(
        "me/push-subscriptions/",
        PushSubscriptionViewSet.as_view({"post": "create"}),
        name="push-subscription-list",
    ),
    path(
        "me/push-subscriptions/<int:pk>/",
        PushSubscriptionViewSet.as_view({"delete": "destroy"}),
        name="push-subscription-detail",
    ),
]
