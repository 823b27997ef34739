"""Taking another database's branch of the code on the test database (PostgreSQL)."""


class SaysItIs:
    """A connection that says it is another vendor's: code with a branch per vendor (the
    embedded default's SQLite, `make run`) takes that branch on the test database."""

    def __init__(self, real, vendor: str):
        self._real, self.vendor = real, vendor

    def __getattr__(self, name):
        return getattr(self._real, name)
