import pytest
from django.contrib.auth import get_user_model


@pytest.fixture
def root_client(client, db):
    """A client logged in as a superuser."""
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    return client
