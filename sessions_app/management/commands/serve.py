"""`manage.py serve`: the production server, Daphne with a drain on SIGTERM (jarvis_site.server).

Run one per worker behind the proxy (docs/deploy.md). SIGTERM or Ctrl-C: readiness fails at
once, running turns finish (up to DRAIN_TIMEOUT_SEC), sockets close with 1012, exit 0.
"""

from django.core.management.base import BaseCommand

from jarvis_site.server import serve


class Command(BaseCommand):
    help = "Serve HTTP and WebSockets with Daphne; SIGTERM drains before exiting."

    def add_arguments(self, parser):
        parser.add_argument("--bind", "-b", default="127.0.0.1", help="address to listen on")
        parser.add_argument("--port", "-p", type=int, default=8000)
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            help="take the client's address from X-Forwarded-For (behind a proxy)",
        )

    def handle(self, *args, bind, port, proxy_headers, **options):
        # Daphne's own access log is plain text on stdout; jarvis_site.shared.log_context logs each
        # request in the configured format instead.
        daphne_args = ["--bind", bind, "--port", str(port), "--verbosity", "0"]
        if proxy_headers:
            daphne_args.append("--proxy-headers")
        serve(daphne_args)
