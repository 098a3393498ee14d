"""URL map: admin, login, the web chat page, the JSON API and its OpenAPI description."""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from notices_app.web.api import GoalViewSet, ScheduleViewSet, service_worker
from sessions_app.web import exports_api, share_api, shared_files_api
from sessions_app.web.api import HistoryImportView, SearchViewSet, SessionViewSet, ToolsViewSet
from sessions_app.web.files_api import FileThumbView, FileUploadView, FileView
from sessions_app.web.workspace_api import WorkspaceFileView, WorkspaceView

router = DefaultRouter()
router.register("sessions", SessionViewSet, basename="session")
router.register("schedules", ScheduleViewSet, basename="schedule")
router.register("goals", GoalViewSet, basename="goal")
router.register("search", SearchViewSet, basename="search")
router.register("tools", ToolsViewSet, basename="tools")

# The chat page's script sends the CSRF token from the cookie with every API write.
chat_page = login_required(ensure_csrf_cookie(TemplateView.as_view(template_name="chat.html")))

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/import/", HistoryImportView.as_view(), name="history-import"),
    # A session's files (docs/design.md §23); a session id has no `/`.
    re_path(r"^api/sessions/(?P<id>[^/]+)/files/$", FileUploadView.as_view(), name="files"),
    re_path(
        r"^api/sessions/(?P<id>[^/]+)/files/(?P<file_id>[^/]+)/$", FileView.as_view(), name="file"
    ),
    re_path(
        r"^api/sessions/(?P<id>[^/]+)/files/(?P<file_id>[^/]+)/thumb/$",
        FileThumbView.as_view(),
        name="file-thumb",
    ),
    # A session's workspace (docs/design.md §28): a file's path may hold `/`.
    re_path(r"^api/sessions/(?P<id>[^/]+)/workspace/$", WorkspaceView.as_view(), name="workspace"),
    re_path(
        r"^api/sessions/(?P<id>[^/]+)/workspace/(?P<path>.+)$",
        WorkspaceFileView.as_view(),
        name="workspace-file",
    ),
    path("api/sessions/<str:id>/shares/", share_api.SessionSharesView.as_view()),
    path("api/sessions/<str:id>/shares/<int:share_id>/", share_api.SessionShareView.as_view()),
    path(
        "api/sessions/<str:id>/shares/<int:share_id>/refresh/",
        share_api.SessionShareRefreshView.as_view(),
    ),
    path("api/shared/<str:token>/", share_api.SharedView.as_view(), name="shared-json"),
    path("api/shared/<str:token>/copy/", share_api.SharedCopyView.as_view()),
    path(
        "api/shared/<str:token>/files/<str:file_id>/",
        shared_files_api.SharedFileView.as_view(),
        name="shared-file",
    ),
    path(
        "api/shared/<str:token>/files/<str:file_id>/thumb/",
        shared_files_api.SharedFileThumbView.as_view(),
        name="shared-file-thumb",
    ),
    path("s/<str:token>", share_api.shared_page, name="shared-page"),
    # The person's kept exports (docs/design.md §31), there after the session's delete too.
    path("api/me/exports/", exports_api.KeptExportsView.as_view(), name="kept-exports"),
    path(
        "api/me/exports/<str:filename>/",
        exports_api.KeptExportView.as_view(),
        name="kept-export",
    ),
    path("api/", include(router.urls)),
    # Before notices_app's: its `me/` view, extended with DELETE (the account).
    path("api/", include("accounts_app.urls")),
    path("api/", include("notices_app.web.urls")),
    path("api/", include("memory_app.urls")),
    path("sw.js", service_worker, name="service-worker"),
    path("", chat_page, name="chat"),
]
