"""Thin DRF views of the tasks engine: validate → service/selector → serialize."""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.exceptions import APIException
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from infrastructure.errors import DomainError, NotFound
from infrastructure.inputs import parse_id
from infrastructure.pagination import LimitOffsetPagination
from organization import registry
from organization.caller import CallerMixin
from organization.idempotency import IDEMPOTENCY_KEY, KEY_REUSED, idempotent
from organization.schema import ERRORS, conflict, errors
from organization.selectors import agent_by_handle

from . import services
from .decisions import decision_json
from .filters import DecisionFilter, TaskFilter
from .models import ApprovalPolicy, DecisionStatus, HumanDecision, Task
from .rules import Actor
from .selectors import (
    VisibleTask,
    comments_of,
    decision_counts,
    decision_for,
    decisions_visible_to,
    estimated_waits,
    events_of,
    inbox_item_for,
    inbox_of,
    policies_of,
    task_for,
    tasks_visible_to,
    visible_task,
)
from .serializers import (
    AssignSerializer,
    CancelSerializer,
    CommentSerializer,
    DelegateSerializer,
    EscalateSerializer,
    InboxItemSerializer,
    InboxPageSerializer,
    InboxQuerySerializer,
    InboxReadSerializer,
    QueueSerializer,
    RecommendationQuerySerializer,
    RecommendationSerializer,
    StatusSerializer,
    TaskCommentSerializer,
    TaskCreateSerializer,
    TaskDetailSerializer,
    TaskEventSerializer,
    TaskSerializer,
    task_data,
    task_detail,
)
from .serializers.decisions import (
    AnswerSerializer,
    ApprovalPolicySerializer,
    ApproveSerializer,
    CommentBodySerializer,
    HumanDecisionSerializer,
    QuestionSerializer,
)
from .tools import recommend_for

MOVE_ERRORS = {**ERRORS, 409: conflict()}


class TaskViewSet(CallerMixin, GenericViewSet):
    serializer_class = TaskSerializer
    filterset_class = TaskFilter
    queryset = Task.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Task.objects.none()
        return tasks_visible_to(self.caller).order_by("-created_at", "-pk")

    def body(self, serializer_class):
        try:
            data = self.request.data
            if isinstance(data, dict):
                # The caller's identity comes from the key: a body naming someone else is refused.
                registry.check_identity(self.caller, data)
            serializer = serializer_class(data=data)
            serializer.is_valid(raise_exception=True)
        except (APIException, DomainError):
            # A move reads its task under its lock, after the body; a task the caller cannot
            # see still answers 404 before anything is said about the body.
            if "pk" in self.kwargs:
                self.task()
            raise
        return serializer.validated_data

    def agent(self, handle: str):
        return agent_by_handle(org=self.caller.organization, handle=handle)

    def task(self):
        return task_for(self.caller, self.kwargs["pk"])

    def task_ref(self) -> VisibleTask:
        """The task of the path, for a move to read once, under its lock (404 there)."""
        return visible_task(self.caller, self.kwargs["pk"])

    def answer(self, task: Task, status: int = http.HTTP_200_OK) -> Response:
        # The service returns the task as it wrote it, with its agents: no need to read it again.
        return Response(task_data(task), status=status)

    @extend_schema(responses={200: TaskSerializer(many=True), **errors(400, 401)})
    def list(self, request):
        tasks = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(tasks)
        items = page if page is not None else list(tasks)
        data = TaskSerializer(items, many=True, context={"waits": estimated_waits(items)}).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(
        request=TaskCreateSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: TaskSerializer, **MOVE_ERRORS, **KEY_REUSED},
    )
    @idempotent
    def create(self, request):
        data = self.body(TaskCreateSerializer)
        handle, parent = data.pop("agent_id"), data.pop("parent")
        task = services.task_create(
            org=self.caller.organization,
            actor=Actor.of(self.caller),
            assignee=self.agent(handle) if handle else None,
            # Read under its lock by the service: 404 there for a task the caller cannot see.
            parent=visible_task(self.caller, parent) if parent else None,
            **data,
        )
        return self.answer(task, http.HTTP_201_CREATED)

    @extend_schema(responses={200: TaskDetailSerializer, **ERRORS})
    def retrieve(self, request, pk=None):
        return Response(task_detail(self.task()))

    # The moves pass the task (and the agent they name) unread: the service reads both under
    # its locks, in the order a read here would have answered 404 (task, then agent).
    @extend_schema(request=AssignSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def assign(self, request, pk=None):
        task = self.task_ref()
        data = self.body(AssignSerializer)
        return self.answer(
            services.task_assign(task=task, actor=Actor.of(self.caller), to=data["agent_id"])
        )

    @extend_schema(request=DelegateSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def delegate(self, request, pk=None):
        task = self.task_ref()
        data = self.body(DelegateSerializer)
        to = data.pop("agent_id")
        return self.answer(
            services.task_delegate(task=task, actor=Actor.of(self.caller), to=to, **data)
        )

    @extend_schema(request=QueueSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def queue(self, request, pk=None):
        task = self.task_ref()
        data = self.body(QueueSerializer)
        to = data.pop("agent_id")
        return self.answer(
            services.task_queue(task=task, actor=Actor.of(self.caller), to=to, **data)
        )

    @extend_schema(request=EscalateSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def escalate(self, request, pk=None):
        task = self.task_ref()
        data = self.body(EscalateSerializer)
        return self.answer(services.task_escalate(task=task, actor=Actor.of(self.caller), **data))

    @extend_schema(request=StatusSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def set_status(self, request, pk=None):
        task = self.task_ref()
        data = self.body(StatusSerializer)
        return self.answer(services.task_set_status(task=task, actor=Actor.of(self.caller), **data))

    @extend_schema(request=CancelSerializer, responses={200: TaskSerializer, **MOVE_ERRORS})
    def cancel(self, request, pk=None):
        task = self.task_ref()
        data = self.body(CancelSerializer)
        return self.answer(services.task_cancel(task=task, actor=Actor.of(self.caller), **data))

    # The conversation: whoever may see the task reads and writes it (404 otherwise).
    @extend_schema(
        responses={200: TaskCommentSerializer(many=True), **ERRORS},
        filters=False,
        summary="The task's comments, oldest first",
    )
    def comments(self, request, pk=None):
        page = self.paginate_queryset(comments_of(self.task()))
        return self.get_paginated_response(TaskCommentSerializer(page, many=True).data)

    @extend_schema(
        request=CommentSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: TaskCommentSerializer, **ERRORS, **KEY_REUSED},
        summary="Comment on the task: its holder, creator and delegator are told",
    )
    @idempotent
    def add_comment(self, request, pk=None):
        task = self.task()
        data = self.body(CommentSerializer)
        comment = services.task_comment(task=task, actor=Actor.of(self.caller), **data)
        return Response(TaskCommentSerializer(comment).data, status=http.HTTP_201_CREATED)

    # Paginated like every list under /api/ (its schema promised so, and a long-lived task's
    # log has no bound); the task filters of /api/tasks do not apply to its events.
    @extend_schema(responses={200: TaskEventSerializer(many=True), **ERRORS}, filters=False)
    def events(self, request, pk=None):
        page = self.paginate_queryset(events_of(self.task()))
        return self.get_paginated_response(TaskEventSerializer(page, many=True).data)


class InboxView(CallerMixin, APIView):
    @extend_schema(
        parameters=[InboxQuerySerializer],
        responses={200: InboxPageSerializer, **ERRORS},
        summary="What reached the calling agent: tasks given to it, comments, finished work",
    )
    def get(self, request):
        agent = self.caller.require_agent()
        query = InboxQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        items = inbox_of(agent)
        if query.validated_data["unread"] is not None:
            items = items.filter(read_at__isnull=query.validated_data["unread"])
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response(InboxItemSerializer(page, many=True).data)


INBOX_MARKED = inline_serializer(
    "InboxMarked",
    fields={
        "success": serializers.BooleanField(),
        "marked": serializers.IntegerField(help_text="How many items this call marked read."),
    },
)


class InboxReadView(CallerMixin, APIView):
    @extend_schema(
        request=InboxReadSerializer,
        responses={200: INBOX_MARKED, **ERRORS},
        summary="Mark inbox items read (all unread ones without ids)",
        operation_id="inbox_read_many",
    )
    def post(self, request):
        agent = self.caller.require_agent()
        registry.check_identity(self.caller, request.data)
        body = InboxReadSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        marked = services.inbox_mark_read(agent=agent, item_ids=body.validated_data["ids"])
        return Response({"success": True, "marked": marked})


class InboxItemReadView(CallerMixin, APIView):
    @extend_schema(
        request=None, responses={200: InboxItemSerializer, **ERRORS}, operation_id="inbox_item_read"
    )
    def post(self, request, item_id):
        agent = self.caller.require_agent()
        item = inbox_item_for(agent, item_id)
        services.inbox_mark_read(agent=agent, item_ids=[item.pk])
        item.refresh_from_db()
        return Response(InboxItemSerializer(item).data)


class RecommendationView(CallerMixin, APIView):
    @extend_schema(
        parameters=[RecommendationQuerySerializer],
        responses={200: RecommendationSerializer, **ERRORS},
        summary="Seed 001's delegation framework: ranked candidates and the suggested decision",
    )
    def get(self, request):
        query = RecommendationQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(recommend_for(self.caller, query.validated_data))


# --- approval policies and decisions (docs/decisions.md) ---------------------------------------


class ApprovalPolicyViewSet(CallerMixin, GenericViewSet):
    """Approval policies: an organization key (or an admin member) reads and writes them."""

    serializer_class = ApprovalPolicySerializer
    queryset = ApprovalPolicy.objects.none()
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApprovalPolicy.objects.none()
        self.caller.require_human()
        return policies_of(self.caller.organization)

    def policy(self) -> ApprovalPolicy:
        policy = self.get_queryset().filter(pk=parse_id(self.kwargs["pk"]) or 0).first()
        if policy is None:
            raise NotFound(f"Approval policy not found: {self.kwargs['pk']}", "policy_not_found")
        return policy

    def shaped(self, policies, **kwargs):
        counts = decision_counts([p.pk for p in policies])
        return ApprovalPolicySerializer(policies, context={"counts": counts}, **kwargs).data

    @extend_schema(responses={200: ApprovalPolicySerializer(many=True), **errors(401, 403)})
    def list(self, request):
        return Response(self.shaped(list(self.get_queryset()), many=True))

    @extend_schema(
        request=ApprovalPolicySerializer,
        responses={201: ApprovalPolicySerializer, **errors(400, 401, 403)},
    )
    def create(self, request):
        self.caller.require_human()
        body = ApprovalPolicySerializer(data=request.data, context={"caller": self.caller})
        body.is_valid(raise_exception=True)
        policy = services.policy_create(org=self.caller.organization, **body.validated_data)
        return Response(self.shaped([policy], many=True)[0], status=http.HTTP_201_CREATED)

    @extend_schema(responses={200: ApprovalPolicySerializer, **ERRORS})
    def retrieve(self, request, pk=None):
        return Response(self.shaped([self.policy()], many=True)[0])

    @extend_schema(
        request=ApprovalPolicySerializer, responses={200: ApprovalPolicySerializer, **ERRORS}
    )
    def partial_update(self, request, pk=None):
        policy = self.policy()
        body = ApprovalPolicySerializer(
            policy, data=request.data, partial=True, context={"caller": self.caller}
        )
        body.is_valid(raise_exception=True)
        policy = services.policy_update(policy=policy, **body.validated_data)
        return Response(self.shaped([policy], many=True)[0])

    @extend_schema(request=None, responses={204: None, **ERRORS})
    def destroy(self, request, pk=None):
        services.policy_delete(policy=self.policy())
        return Response(status=http.HTTP_204_NO_CONTENT)


DECISION_ERRORS = {**ERRORS, 409: conflict()}


class DecisionViewSet(CallerMixin, GenericViewSet):
    """Decisions: approvals a policy asked for and agents' questions; humans decide them."""

    serializer_class = HumanDecisionSerializer
    filterset_class = DecisionFilter
    queryset = HumanDecision.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return HumanDecision.objects.none()
        return decisions_visible_to(self.caller)

    def answer(self, decision, status: int = http.HTTP_200_OK) -> Response:
        return Response(decision_json(decision), status=status)

    def body(self, serializer_class) -> dict:
        if isinstance(self.request.data, dict):
            registry.check_identity(self.caller, self.request.data)
        serializer = serializer_class(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    @extend_schema(responses={200: HumanDecisionSerializer(many=True), **errors(400, 401)})
    def list(self, request):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response([decision_json(d) for d in page])

    @extend_schema(
        request=QuestionSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: HumanDecisionSerializer, **ERRORS, **KEY_REUSED},
        summary="An agent asks a human a question about a task it holds",
    )
    @idempotent
    def create(self, request):
        self.caller.require_agent()
        data = self.body(QuestionSerializer)
        decision = services.decision_ask(
            caller=self.caller,
            task_id=data["task"],
            question=data["question"],
            options=data.get("options"),
        )
        return self.answer(decision, http.HTTP_201_CREATED)

    @extend_schema(responses={200: HumanDecisionSerializer, **ERRORS})
    def retrieve(self, request, pk=None):
        return self.answer(decision_for(self.caller, pk))

    @extend_schema(
        request=ApproveSerializer, responses={200: HumanDecisionSerializer, **DECISION_ERRORS}
    )
    def approve(self, request, pk=None):
        data = self.body(ApproveSerializer)
        return self.answer(services.decision_approve(caller=self.caller, pk=pk, **data))

    def _close(self, pk, status, serializer_class=CommentBodySerializer):
        data = self.body(serializer_class)
        return self.answer(
            services.decision_close(caller=self.caller, pk=pk, status=status, **data)
        )

    @extend_schema(
        request=CommentBodySerializer, responses={200: HumanDecisionSerializer, **DECISION_ERRORS}
    )
    def reject(self, request, pk=None):
        return self._close(pk, DecisionStatus.REJECTED)

    @extend_schema(
        request=CommentBodySerializer, responses={200: HumanDecisionSerializer, **DECISION_ERRORS}
    )
    def request_changes(self, request, pk=None):
        return self._close(pk, DecisionStatus.CHANGES_REQUESTED)

    @extend_schema(
        request=AnswerSerializer, responses={200: HumanDecisionSerializer, **DECISION_ERRORS}
    )
    def answer_question(self, request, pk=None):
        return self._close(pk, DecisionStatus.ANSWERED, AnswerSerializer)

    @extend_schema(request=None, responses={200: HumanDecisionSerializer, **DECISION_ERRORS})
    def cancel(self, request, pk=None):
        return self.answer(services.decision_cancel(caller=self.caller, pk=pk))
