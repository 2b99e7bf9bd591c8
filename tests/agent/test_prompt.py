"""The network rule the agent reads matches what the egress proxy does (bot/agent/prompt.py)."""

from __future__ import annotations

from bot.agent.prompt import network_rule


def test_with_the_network_off_allow_cidrs_is_said_to_work_by_address_only() -> None:
    """The proxy looks no name up then (bot/sandbox/egress_policy.py): the agent is told to use addresses."""
    rule = network_rule(internet=False, allow_cidrs=("10.77.0.0/24",))
    assert rule.startswith("The network is off except these private ranges, by IP address only (names are not "
                           "looked up)") and rule.endswith(": 10.77.0.0/24.")
    assert network_rule(internet=False) == ("The network is off: you cannot install packages or fetch anything; "
                                            "work with what is installed.")
