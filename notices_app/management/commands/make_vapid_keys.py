"""`manage.py make_vapid_keys`: a new VAPID key pair for Web Push, printed as the environment
lines to put in `.env` (docs/design.md §16).

Keep the private key secret and stable: browsers subscribed with one public key receive
pushes signed with its private key only; a new pair means every browser subscribes again.
"""

from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management.base import BaseCommand

from notices_app.core.vapid import private_key_text, public_key_text


class Command(BaseCommand):
    help = "Print a new VAPID key pair (P-256) as VAPID_PUBLIC_KEY / VAPID_PRIVATE_KEY lines."

    def add_arguments(self, parser):
        parser.add_argument(
            "--subject",
            default="mailto:admin@example.com",
            help="VAPID_SUBJECT: a mailto: or https:// URL push services can reach you at",
        )

    def handle(self, *args, subject, **options):
        key = ec.generate_private_key(ec.SECP256R1())
        self.stdout.write(f"VAPID_PUBLIC_KEY={public_key_text(key)}")
        self.stdout.write(f"VAPID_PRIVATE_KEY={private_key_text(key)}")
        self.stdout.write(f"VAPID_SUBJECT={subject}")
