"""A model's reply is not ours to trust: a NUL in its text or arguments (PostgreSQL refuses NUL in
text and jsonb) or arguments nested past what the API can render must neither fail the work nor
leave the session unreadable. (A managed run's side: tests/runtime/test_untrusted_output.py.)"""

import pytest

from collaboration.providers.base import MAX_ARGUMENT_DEPTH
from tests.collaboration.conftest import calls_then_answers, run, specialists
from tests.collaboration.starts import started
from tests.conftest import KeyClient
from tests.factories import make_key
from tests.fake_llm import Reply, ToolUse

pytestmark = pytest.mark.django_db(transaction=True)

ROSTER = "get_organization_roster"


def nested(levels: int) -> str:
    return '{"filter": ' + "[" * levels + "]" * levels + "}"


def test_a_nul_in_answers_and_the_synthesis_is_kept_as_a_replacement_character(acme, fake_llm):
    fake_llm.on(agent="a", replies=[Reply("before\x00after\nVERDICT: yes\nCONFIDENCE: 0.9")])
    fake_llm.on(purpose="synthesis", replies=[Reply("synth\x00esis")])
    session = run(started(acme, specialists("a", "b"), synthesis="coordinator"))
    assert session.status == "completed", session.error
    answer = session.contributions.get(agent_key="a")
    assert (answer.status, answer.response.splitlines()[0]) == ("completed", "before\ufffdafter")
    assert session.result == "synth\ufffdesis"


@pytest.mark.parametrize(
    "arguments",
    [
        nested(300),  # past orjson's 255 levels: the session would answer 500 from then on
        nested(5_000),  # past the JSON parser's own recursion limit
        {"filter": "by_expertise", "expertise": "Postgre\x00SQL"},
    ],
)
def test_a_tool_call_the_service_cannot_keep_is_refused_and_the_session_reads(
    acme, fake_llm, arguments
):
    calls_then_answers(
        fake_llm, "a", ToolUse(ROSTER, arguments, id="c1"), "done\nVERDICT: yes\nCONFIDENCE: 0.9"
    )
    agents = [{"name": "a", "config": {"tools": [ROSTER]}}, {"name": "b"}]
    session = run(started(acme, agents, synthesis="merge"))
    assert session.status == "completed", session.error
    response = KeyClient(make_key(acme)).get(f"/api/collaborations/{session.pk}")
    assert response.status_code == 200
    (call,) = [t for c in response.json()["contributions"] for t in c["turns"] if t.get("name")]
    if isinstance(arguments, dict):  # a NUL: run with it replaced
        assert call["arguments"]["expertise"] == "Postgre\ufffdSQL"
        assert call["status"] == "ok"
    else:
        assert call["status"] == "error"
        assert call["error"]["code"] == "invalid_arguments"
        if len(arguments) < 1_000:
            assert f"deeper than {MAX_ARGUMENT_DEPTH} levels" in call["error"]["error"]


def test_token_counts_a_server_claims_are_bounded_before_anything_keeps_them(acme, fake_llm):
    """2**31 would overflow the contribution's integer column (and the ledger's)."""
    from costs.models import MAX_CALL_TOKENS

    fake_llm.on(
        agent="a",
        replies=[
            Reply(
                "ok\nVERDICT: yes\nCONFIDENCE: 0.9", prompt_tokens=2**31, completion_tokens=2**40
            ),
        ],
    )
    session = run(started(acme, specialists("a"), synthesis="merge"))
    assert session.status == "completed", session.error
    answer = session.contributions.get(agent_key="a")
    assert answer.tokens_used == 2 * MAX_CALL_TOKENS


@pytest.mark.parametrize("model", ["fake\x00model", "m" * 300])
def test_what_the_server_says_its_model_is_is_kept_as_it_fits(acme, fake_llm, model):
    fake_llm.on(agent="a", replies=[Reply("ok\nVERDICT: yes\nCONFIDENCE: 0.9", model=model)])
    session = run(started(acme, specialists("a"), synthesis="merge"))
    assert session.status == "completed", session.error
    answer = session.contributions.get(agent_key="a")
    assert answer.model == model.replace("\x00", "\ufffd")[:100]


def test_a_response_nested_past_pythons_limit_is_a_provider_error_not_a_crash():
    """The SDK parses the response before we see it: past ~1,000 levels its JSON parser raises
    RecursionError, which must end the call as any failed call does (retried, then reported)."""
    import anthropic

    from collaboration.providers.base import ProviderError
    from collaboration.providers.http import CallState, sdk_call

    def parse_deep():
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    with pytest.raises(ProviderError, match="anthropic: the response nests too deep to be read"):
        sdk_call("anthropic", anthropic, CallState(deadline=None), parse_deep)
