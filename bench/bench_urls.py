"""The service's URLs plus two floors of bench/api.py, never part of the service:

- `/bench/minimal`: a Django view returning a small JSON body (the floor of the agent GET);
- `/bench/assign-floor/<id>`: an assignment reduced to what no design of the move can avoid —
  the API's authentication, throttle, body serializer and answer around ONE statement in
  autocommit (no rules, no locks across statements, no audit row nor inbox item). Its
  throughput is the ceiling of `assign_vs_get` for any redesign of the move.
"""

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import *  # noqa: F403
from config.urls import urlpatterns as service_urls
from organization.caller import CallerMixin
from organization.models import Agent
from tasks.models import Task, TaskStatus
from tasks.serializers import AssignSerializer, task_data


def minimal(request):
    return JsonResponse({"ok": True})


# The task given to the named agent of the caller's organization, returned with the handle.
ASSIGN_IN_ONE_STATEMENT = (
    f"UPDATE {Task._meta.db_table} t SET status = %s, assignee_id = a.id, assigned_at = now(), "
    f"queued_for_id = NULL, queued_by_id = NULL, queued_at = NULL FROM {Agent._meta.db_table} a "
    "WHERE t.id = %s AND t.organization_id = %s AND a.organization_id = %s AND a.handle = %s "
    "RETURNING t.*, a.handle AS assignee_handle"
)


class AssignFloor(CallerMixin, APIView):
    def post(self, request, pk: int):
        serializer = AssignSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        org = self.caller.organization.pk
        with connection.cursor() as cursor:
            cursor.execute(
                ASSIGN_IN_ONE_STATEMENT,
                [TaskStatus.ASSIGNED, pk, org, org, serializer.validated_data["agent_id"]],
            )
            row = cursor.fetchone()
            if row is None:
                raise NotFound("Task or agent not found.")
            values = dict(zip([c.name for c in cursor.description], row, strict=True))
        fields = [f.attname for f in Task._meta.concrete_fields]
        task = Task.from_db(connection.alias, fields, [values[f] for f in fields])
        task.assignee = Agent(pk=task.assignee_id, handle=values["assignee_handle"])
        return Response(task_data(task))


urlpatterns = [
    path("bench/minimal", minimal),
    path("bench/assign-floor/<int:pk>", AssignFloor.as_view()),
    *service_urls,
]
