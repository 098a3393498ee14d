from django.apps import AppConfig


class AccountsAppConfig(AppConfig):
    """A person's data as a whole (docs/design.md §21): retention, the download of
    everything, deleting the account, across sessions_app, memory_app and notices_app.

    It sits above the three apps and calls their services; none of them imports it.
    """

    name = "accounts_app"
    verbose_name = "Your data"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: an AppConfig module is loaded before the models are ready.
        from accounts_app.settings_section import MEMORY_SECTION, RETENTION_SECTION
        from notices_app.services.me import settings_section_register

        settings_section_register(RETENTION_SECTION)
        settings_section_register(MEMORY_SECTION)
