import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from organization.models import Membership, Organization


class Command(BaseCommand):
    help = (
        "Create the superuser 'admin' once, printing its password that one time; "
        "--reset gives it a new password (printed once)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--org",
            help="Make the new admin a member of this organization (slug; default: demo, if it exists)",
        )
        parser.add_argument(
            "--reset", action="store_true", help="Set a new random password and print it once"
        )

    def handle(self, *args, **options):
        User = get_user_model()
        username = options["username"]
        # A slug given (blank too: `--org "$ORG"` with ORG unset) and not found is a mistake to
        # report, not a membership silently skipped.
        given = options["org"]
        org = Organization.objects.filter(slug="demo" if given is None else given).first()
        if org is None and given is not None:
            raise CommandError(f"No organization with slug {given!r}.")
        user = User.objects.filter(username=username).first()
        password = secrets.token_urlsafe(12)
        if user is not None and not options["reset"]:
            self.stdout.write(
                f"Admin user '{username}' exists (password shown when it was made; "
                "`manage.py ensure_admin --reset` sets a new one)."
            )
            return
        if user is not None:
            user.set_password(password)
            user.is_active = user.is_staff = user.is_superuser = True
            user.save(update_fields=["password", "is_active", "is_staff", "is_superuser"])
            self.stdout.write(
                f"Admin user '{username}' has a new password: {password}\n(shown once)"
            )
            return
        user = User.objects.create_superuser(username=username, email="", password=password)
        if org is not None:
            Membership.objects.get_or_create(
                user=user, organization=org, defaults={"is_admin": True}
            )
        self.stdout.write(
            f"Admin user created — username: {username}  password: {password}\n"
            "(shown once; `manage.py ensure_admin --reset` sets a new one)"
        )
