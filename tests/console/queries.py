"""How many SQL statements a console page runs."""

from django.db import connection


def queries_of(client, url) -> int:
    """How many SQL statements a GET of `url` runs (once warm)."""
    client.get(url)
    seen = []

    def count(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert client.get(url).status_code == 200
    return len(seen)
