from django.urls import path

from . import api

tasks = api.TaskViewSet.as_view({"get": "list", "post": "create"})


def action(name: str):
    return api.TaskViewSet.as_view({"post": name})


urlpatterns = [
    path("tasks", tasks, name="tasks"),
    path("tasks/<str:pk>", api.TaskViewSet.as_view({"get": "retrieve"}), name="task"),
    path("tasks/<str:pk>/assign", action("assign"), name="task-assign"),
    path("tasks/<str:pk>/delegate", action("delegate"), name="task-delegate"),
    path("tasks/<str:pk>/queue", action("queue"), name="task-queue"),
    path("tasks/<str:pk>/escalate", action("escalate"), name="task-escalate"),
    path("tasks/<str:pk>/status", action("set_status"), name="task-status"),
    path("tasks/<str:pk>/cancel", action("cancel"), name="task-cancel"),
    path("tasks/<str:pk>/events", api.TaskViewSet.as_view({"get": "events"}), name="task-events"),
    path(
        "tasks/<str:pk>/comments",
        api.TaskViewSet.as_view({"get": "comments", "post": "add_comment"}),
        name="task-comments",
    ),
    path("inbox", api.InboxView.as_view(), name="inbox"),
    path("inbox/read", api.InboxReadView.as_view(), name="inbox-read"),
    path("inbox/<str:item_id>/read", api.InboxItemReadView.as_view(), name="inbox-item-read"),
    path(
        "delegation/recommendation",
        api.RecommendationView.as_view(),
        name="delegation-recommendation",
    ),
]
