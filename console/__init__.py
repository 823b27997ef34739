"""The manager's console: the admin index as a dashboard of what needs a human, and the pages
behind it. The top layer: it reads every app below it and none of them imports it."""
