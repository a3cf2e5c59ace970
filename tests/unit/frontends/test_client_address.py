"""The client's address behind a trusted proxy (issue #34, point 8): taken from a trusted peer's forwarded
header only, as the rightmost hop that is no trusted proxy, in one spelling; a header whose client hop
cannot be read is refused (400), never guessed past, never a crash."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.config.listener_schema import ForwardedHeader
from actors.frontends.auth import Refused
from actors.frontends.client_address import MAX_FORWARDED_BYTES, TrustedProxies

XFF = TrustedProxies((ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")))
FORWARDED = TrustedProxies(XFF.networks, header=ForwardedHeader.FORWARDED)


def xff(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-forwarded-for", value.encode("latin-1")) for value in values]


def forwarded(*values: str) -> list[tuple[bytes, bytes]]:
    return [(b"forwarded", value.encode("latin-1")) for value in values]


@pytest.mark.parametrize(
    ("header", "client"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("198.51.100.7, 10.0.0.5", "198.51.100.7"),  # a trusted proxy's hop is skipped
        ("6.6.6.6, 198.51.100.7", "198.51.100.7"),  # what the client wrote to the left is never read
        ("not an address, 198.51.100.7", "198.51.100.7"),
        ("::ffff:198.51.100.7", "198.51.100.7"),  # a second spelling of the same client
        ("2001:DB8:0::7", "2001:db8::7"),
        ("[2001:db8::7]:4711", "2001:db8::7"),
        ("198.51.100.7:4711", "198.51.100.7"),
        ("10.1.1.1, 10.2.2.2", "10.1.1.1"),  # every hop trusted: the first is the client
    ],
)
def test_the_client_is_the_rightmost_hop_that_is_no_trusted_proxy(header: str, client: str) -> None:
    assert XFF.client_of("10.0.0.1", xff(header)) == client


def test_headers_sent_twice_are_read_as_one_list() -> None:
    assert XFF.client_of("10.0.0.1", xff("198.51.100.7", "198.51.100.8, 10.0.0.2")) == "198.51.100.8"


def test_an_untrusted_peer_is_known_by_its_own_address_whatever_it_sends() -> None:
    assert XFF.client_of("198.51.100.9", xff("203.0.113.1")) == "198.51.100.9"
    assert XFF.client_of("::ffff:198.51.100.9", forwarded("for=203.0.113.1")) == "198.51.100.9"
    assert XFF.client_of("10.0.0.1", forwarded("for=203.0.113.1")) == "10.0.0.1"  # not the header it reads


def test_with_the_proxy_protocol_no_header_is_read() -> None:
    proxied = TrustedProxies(XFF.networks, proxy_protocol=True)
    assert proxied.client_of("198.51.100.7", xff("203.0.113.1")) == "198.51.100.7"
    assert proxied.wants_proxy_header("10.0.0.1") and not proxied.wants_proxy_header("198.51.100.7")
    assert not XFF.wants_proxy_header("10.0.0.1")


@pytest.mark.parametrize(
    "header",
    ["", "198.51.100.7\x1b[31m", "01.2.3.4", "fe80::1%eth0", "1.2.3.4:65536", "1.2.3.4:²", "unknown", "_x"],
)
def test_a_client_hop_that_is_no_address_is_refused(header: str) -> None:
    with pytest.raises(Refused) as refused:
        XFF.client_of("10.0.0.1", xff(f"{header}, 10.0.0.9"))
    assert refused.value.status == 400


def test_an_oversized_header_is_refused() -> None:
    with pytest.raises(Refused) as refused:
        XFF.client_of("10.0.0.1", xff("10.0.0.2, " * (MAX_FORWARDED_BYTES // 10) + "198.51.100.7"))
    assert refused.value.status == 400 and "over" in refused.value.reason


@pytest.mark.parametrize(
    ("header", "client"),
    [
        ("for=198.51.100.7", "198.51.100.7"),
        ('for="[2001:db8:cafe::17]:4711";proto=https;by=10.0.0.1', "2001:db8:cafe::17"),
        ('for="x, for=6.6.6.6", For=198.51.100.7', "198.51.100.7"),  # a comma in quotes is no hop
        ("for=198.51.100.7, for=10.0.0.3", "198.51.100.7"),
        ("for=_hidden-node", "_hidden-node"),  # RFC 7239 obfuscated: a client of its own
        ("for=unknown", "unknown"),
        ("proto=http", "unknown"),  # an element that names nobody
    ],
)
def test_forwarded_names_the_client_by_its_for_parameter(header: str, client: str) -> None:
    assert FORWARDED.client_of("10.0.0.1", forwarded(header)) == client


@pytest.mark.parametrize("header", ['for="198.51.100.7', "for=evil", "for", "for=1.2.3.4=5"])
def test_a_malformed_forwarded_client_element_is_refused(header: str) -> None:
    with pytest.raises(Refused) as refused:
        FORWARDED.client_of("10.0.0.1", forwarded(header))
    assert refused.value.status == 400


@given(st.text(max_size=200), st.sampled_from([XFF, FORWARDED]))
def test_any_header_is_an_address_or_a_refusal_never_a_crash(header: str, proxies: TrustedProxies) -> None:
    raw = [(proxies.header.value.encode(), header.encode("utf-8", "surrogatepass"))]
    try:
        client = proxies.client_of("10.0.0.1", raw)
    except Refused as refused:
        assert refused.status == 400
    else:
        assert client and "\n" not in client and "\x1b" not in client
