"""Make sure someone can log in to a fresh local install, and say how."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

FIRST_LOGIN_FILE = "first_login.txt"


class Command(BaseCommand):
    help = "Create a local admin user on first run and print how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="jarvis")
        # `make cluster` serves the site through its proxy, not on `make run`'s port.
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="the address people open"
        )

    def handle(self, *args, username, url, **options):
        User = get_user_model()
        login_file = settings.VAR_DIR / FIRST_LOGIN_FILE
        if User.objects.filter(is_superuser=True).exists():
            names = ", ".join(
                User.objects.filter(is_superuser=True).values_list("username", flat=True)
            )
            hint = (
                f" (first password in {login_file.relative_to(settings.BASE_DIR)})"
                if login_file.exists()
                else ""
            )
            self.stdout.write(f"Log in at {url} as {names}{hint}.")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        login_file.write_text(f"username: {username}\npassword: {password}\n")
        login_file.chmod(0o600)
        self.stdout.write(
            self.style.SUCCESS(
                "\nFirst run: a local user was created.\n"
                f"  Open      {url}\n"
                f"  Username  {username}\n"
                f"  Password  {password}\n"
                f"(also saved in {login_file.relative_to(settings.BASE_DIR)}; "
                "change it with `python manage.py changepassword`)\n"
            )
        )
