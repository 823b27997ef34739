from django.urls import path

from . import api

tasks = api.TaskViewSet.as_view({"get": "list", "post": "create"})


def action(name: str):
    return api.TaskViewSet.as_view({"post": name})


policies = api.ApprovalPolicyViewSet
decisions = api.DecisionViewSet


def decide(name: str):
    return decisions.as_view({"post": name})


urlpatterns = [
    path(
        "approval-policies",
        policies.as_view({"get": "list", "post": "create"}),
        name="approval-policies",
    ),
    path(
        "approval-policies/<str:pk>",
        policies.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="approval-policy",
    ),
    path("decisions", decisions.as_view({"get": "list", "post": "create"}), name="decisions"),
    path("decisions/<str:pk>", decisions.as_view({"get": "retrieve"}), name="decision"),
    path("decisions/<str:pk>/approve", decide("approve"), name="decision-approve"),
    path("decisions/<str:pk>/reject", decide("reject"), name="decision-reject"),
    path(
        "decisions/<str:pk>/request_changes",
        decide("request_changes"),
        name="decision-request-changes",
    ),
    path("decisions/<str:pk>/answer", decide("answer_question"), name="decision-answer"),
    path("decisions/<str:pk>/cancel", decide("cancel"), name="decision-cancel"),
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
