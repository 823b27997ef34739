"""Thin DRF views of the ledger, the totals and the budgets: selector or service → serializer."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from organization import registry
from organization.caller import CallerMixin
from organization.idempotency import IDEMPOTENCY_KEY, KEY_REUSED, idempotent
from organization.schema import conflict, errors

from . import budgets, selectors, services
from .filters import UsageFilter
from .models import UsageRecord
from .serializers import (
    BudgetAlertSerializer,
    BudgetSerializer,
    BudgetSetSerializer,
    CostQuerySerializer,
    CostRowSerializer,
    UsageRecordSerializer,
    UsageReportSerializer,
)


def valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class UsageView(CallerMixin, generics.ListAPIView):
    serializer_class = UsageRecordSerializer
    filterset_class = UsageFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return UsageRecord.objects.none()
        return selectors.usage_of(caller=self.caller)

    @extend_schema(
        responses={200: UsageRecordSerializer(many=True), **errors(400, 401)},
        summary="The ledger: one row per model call, newest first (an agent: its own)",
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=UsageReportSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={
            201: UsageRecordSerializer,
            **errors(400, 401, 403, 404),
            409: conflict("report_exceeds_budget: it would exhaust a budget not the agent's own"),
            **KEY_REUSED,
        },
        summary="Report a model call the agent made itself (agent key; marked self-reported)",
    )
    @idempotent
    def post(self, request, *args, **kwargs):
        if isinstance(request.data, dict):
            registry.check_identity(self.caller, request.data)
        data = valid(UsageReportSerializer, request.data)
        record = services.usage_report(caller=self.caller, **data)
        return Response(UsageRecordSerializer(record).data, status=http.HTTP_201_CREATED)


class CostsView(CallerMixin, APIView):
    @extend_schema(
        parameters=[CostQuerySerializer],
        responses={200: CostRowSerializer(many=True), **errors(400, 401)},
        summary="Totals by agent, team, model or day (an agent: its own)",
    )
    def get(self, request):
        query = valid(CostQuerySerializer, request.query_params)
        rows = selectors.cost_rows(caller=self.caller, **query)
        return Response(CostRowSerializer(rows, many=True).data)


class BudgetsView(CallerMixin, APIView):
    @extend_schema(
        responses={200: BudgetSerializer(many=True), **errors(401)},
        summary="Budgets with spent, reserved, remaining and state (an agent: those covering it)",
    )
    def get(self, request):
        return Response(BudgetSerializer(selectors.budgets_of(caller=self.caller), many=True).data)

    @extend_schema(
        request=BudgetSetSerializer,
        responses={
            201: BudgetSerializer,
            200: BudgetSerializer,
            **errors(400, 401, 403, 404),
        },
        summary="Set a budget (organization key or admin member); setting it again changes it",
    )
    def post(self, request):
        self.caller.require_human()
        data = valid(BudgetSetSerializer, request.data)
        limit = data.get("monthly_limit_usd", data.get("limit_usd"))
        budget, created = budgets.budget_set(
            caller=self.caller,
            scope=data["scope"],
            limit_usd=limit,
            team=data.get("team"),
            agent=data.get("agent"),
            task=data.get("task"),
        )
        status = http.HTTP_201_CREATED if created else http.HTTP_200_OK
        return Response(BudgetSerializer(budget).data, status=status)


class BudgetAlertsView(CallerMixin, generics.ListAPIView):
    serializer_class = BudgetAlertSerializer

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return selectors.alerts_of(caller=None)
        return selectors.alerts_of(caller=self.caller)

    @extend_schema(
        responses={200: BudgetAlertSerializer(many=True), **errors(400, 401, 403)},
        summary="Budget alerts for the organization's humans (80 % and exhausted), newest first",
        filters=False,
    )
    def get(self, request, *args, **kwargs):
        self.caller.require_human()
        return super().get(request, *args, **kwargs)
