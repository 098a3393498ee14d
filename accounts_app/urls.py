"""URLs of accounts_app, under /api/ (included by jarvis_site.urls before notices_app's, so
that `me/` answers DELETE as well as notices_app's GET and PATCH)."""

from django.urls import path

from accounts_app.api import MeExportView, MeView

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("me/export/", MeExportView.as_view(), name="me-export"),
]
