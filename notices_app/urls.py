"""URLs of notices_app, under /api/ (included by jarvis_site.urls); the service worker is
served at the site's root."""

from django.urls import path

from notices_app.api import MeView, PushSubscriptionViewSet

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
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
