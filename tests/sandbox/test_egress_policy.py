"""The operator's ceiling on decode.yml's `allow_cidrs` (DECODE_ALLOW_CIDRS_MAX), and the IPv4 addresses IPv6
forms carry: pure decisions of bot/sandbox/egress_policy.py."""

from __future__ import annotations

import ipaddress

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.sandbox.egress_policy import check_ceiling, embedded_ipv4


@pytest.mark.parametrize("cidr, reaches", [
    ("10.0.0.0/8", "10.0.0.0/8"), ("172.17.0.0/16", "172.16.0.0/12"), ("0.0.0.0/0", "0.0.0.0/8"),
    ("100.100.0.0/16", "100.64.0.0/10"), ("fd00::/8", "fc00::/7"), ("::ffff:0:0/96", "::ffff:0:0/96"),
    ("::ffff:10.0.0.0/104", "::ffff:0:0/96"), ("64:ff9b::/96", "64:ff9b::/96"), ("198.18.0.0/16", "198.18.0.0/15"),
])
def test_without_a_ceiling_allow_cidrs_may_open_public_ranges_only(cidr: str, reaches: str) -> None:
    with pytest.raises(ConfigError) as e:
        check_ceiling(("198.51.100.0/24", cidr), ())
    assert str(e.value) == (f".github/decode.yml: allow_cidrs lists {cidr}, which reaches {reaches}: the operator's "
                            "DECODE_ALLOW_CIDRS_MAX (unset: public ranges only) does not cover it; ask them to add it "
                            "there, or remove it")
    check_ceiling(("198.51.100.0/24", "2606:4700::/32"), ())


def test_the_ceiling_admits_the_ranges_inside_it_and_nothing_wider() -> None:
    ceiling = Settings.from_env({"DECODE_ALLOW_CIDRS_MAX": "10.20.0.0/16, fd12:3456::/48"}).sandbox.allow_cidrs_max
    assert ceiling == ("10.20.0.0/16", "fd12:3456::/48")
    check_ceiling(("10.20.0.0/16", "10.20.7.1", "fd12:3456:0:1::/64", "8.8.8.8/32"), ceiling)
    for wider in ("10.0.0.0/8", "10.21.0.0/16", "fd12::/16", "0.0.0.0/0"):
        with pytest.raises(ConfigError, match=rf"lists {wider}, .*DECODE_ALLOW_CIDRS_MAX \(10.20.0.0/16, fd12"):
            check_ceiling((wider,), ceiling)


def test_a_ceiling_that_does_not_parse_is_a_setting_error() -> None:
    with pytest.raises(ConfigError, match="^DECODE_ALLOW_CIDRS_MAX has 'intranet', which is not a CIDR"):
        Settings.from_env({"DECODE_ALLOW_CIDRS_MAX": "10.0.0.0/8,intranet"})
    assert Settings.from_env({}).sandbox.allow_cidrs_max == ()


@pytest.mark.parametrize("address, carried", [
    ("::ffff:10.0.0.1", ["10.0.0.1"]),  # mapped
    ("::ffff:0:a00:1", ["10.0.0.1"]),  # translated
    ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),  # NAT64
    ("64:ff9b:1::a9fe:a9fe", ["169.254.169.254"]),  # local-use NAT64, /96 format
    ("64:ff9b:1:a9fe:a9:fe00::", ["169.254.169.254"]),  # local-use NAT64, /48 format
    ("2002:a9fe:a9fe::1", ["169.254.169.254"]),  # 6to4
    ("2001:0:c633:6401::9b9b:9b37", ["198.51.100.1", "100.100.100.200"]),  # Teredo server, client
    ("::7f00:1", ["127.0.0.1"]),  # IPv4-compatible (deprecated, but a stack may still route it)
    ("2606:4700::1111", []), ("::1", []), ("::", []),  # ::/112 carries no host
])
def test_ipv6_forms_carry_the_ipv4_they_embed(address: str, carried: list[str]) -> None:
    assert embedded_ipv4(ipaddress.ip_address(address)) == [ipaddress.ip_address(a) for a in carried]
