import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from organization.models import Membership, Organization


class Command(BaseCommand):
    help = "Create the superuser 'admin' once, printing its password that one time."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--org", default="demo", help="Make the admin a member of this org")

    def handle(self, *args, **options):
        User = get_user_model()
        username = options["username"]
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Admin user '{username}' exists (password shown when it was made).")
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(username=username, email="", password=password)
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is not None:
            Membership.objects.get_or_create(
                user=user, organization=org, defaults={"is_admin": True}
            )
        self.stdout.write(
            f"Admin user created — username: {username}  password: {password}\n"
            "(shown once; change it in the admin or with `manage.py changepassword`)"
        )
