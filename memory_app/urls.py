"""URLs of memory_app, under /api/: the person's procedures (docs/design.md §29)."""

from django.urls import path

from memory_app.api import ProceduresView, ProcedureView

urlpatterns = [
    path("me/procedures/", ProceduresView.as_view(), name="procedures"),
    path("me/procedures/<int:procedure_id>/", ProcedureView.as_view(), name="procedure"),
]
