"""AGENT_FETCH_ALLOW: the operator's allowlist for fetch_url, parsed and checked at startup."""

from __future__ import annotations

from ipaddress import ip_network

import pytest
from pydantic import ValidationError

from durable_agents.workers.settings import AgentSettings


def test_allowlist_of_networks_and_host_names_reaches_the_fetch_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_FETCH_ALLOW", " 10.0.0.0/8, Wiki.Internal., fd00::/8,192.168.1.7,")
    monkeypatch.setenv("AGENT_FETCH_TIMEOUT_SECONDS", "7.5")
    policy = AgentSettings().fetch_policy()
    assert policy.allow.networks == tuple(
        ip_network(n) for n in ("10.0.0.0/8", "fd00::/8", "192.168.1.7/32")
    )
    assert policy.allow.hosts == {"wiki.internal"}
    assert policy.timeout_seconds == 7.5


def test_no_allowlist_means_public_addresses_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_FETCH_ALLOW", raising=False)
    allow = AgentSettings().fetch_policy().allow
    assert allow.networks == () and allow.hosts == frozenset()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("10.0.0.1/8", "'10.0.0.1/8' is not a valid IP network"),
        ("10.0.0.0/33", "'10.0.0.0/33' is not a valid IP network"),
        ("2130706433", "'2130706433' is not a valid IP network"),
        ("10.0.0.0/8,http://wiki", "'http://wiki' is neither an IP network nor a host name"),
        ("wiki.internal:8080", "'wiki.internal:8080' is neither"),
        ("*.internal", "'*.internal' is neither"),
    ],
)
def test_bad_allowlist_entry_stops_startup_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    monkeypatch.setenv("AGENT_FETCH_ALLOW", value)
    with pytest.raises(ValidationError) as err:
        AgentSettings()
    assert "fetch_allow" in str(err.value)
    assert f"fetch allowlist entry {why}" in str(err.value)
